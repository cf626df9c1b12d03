#!/usr/bin/env python3
"""spark against the numbers measured before it existed (bench/anchors.csv: the staged path as
eager PyTorch runs it, and a fused Triton kernel), for the grid rows they share (K = 192, bf16
weights).  Those numbers come from another process on another day, so read the ratios as
approximate; spark-bench's own staged arm is the same-run comparison.

Usage: bench/anchors.py RESULT.json [RESULT-pdl.json]
"""
import csv
import json
import os
import sys

DECODE = lambda k: k[0] in (8, 11, 16) and k[1] <= 32


def anchors():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "anchors.csv")
    with open(path) as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return {(int(r["H"]), int(r["M"]), r["out"]): r for r in rows}


def spark_rows(path):
    with open(path) as f:
        d = json.load(f)
    return {(r["H"], r["M"], r["out"]): r["spark_us"] for r in d["rows"]
            if r.get("status") == "ok" and r["K"] == 192 and r["weights"] == "bf16"
            and r.get("out_pitch", 576) == 576}  # the anchors were measured on contiguous rows


def rng(pairs):
    if not pairs:
        return "n/a"
    lo, hi = min(pairs), max(pairs)
    return f"{lo[0]:.2f}–{hi[0]:.2f} (highest H={hi[1][0]} M={hi[1][1]} {hi[1][2]})"


def report(path, a):
    spark = spark_rows(path)
    shared = [k for k in a if k in spark]
    print(f"{path}: {len(shared)} rows shared with anchors.csv")
    for col, label in (("triton_us", "spark / Triton"), ("staged_us", "spark / PyTorch staged")):
        for name, keep in (("all", lambda k: True), ("decode H<=16, M<=32", DECODE)):
            for out in ("bf16", "e4m3"):
                pairs = [(spark[k] / float(a[k][col]), k) for k in shared if keep(k) and k[2] == out]
                print(f"  {label:22s} {name:20s} {out} out: {rng(pairs)}")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    a = anchors()
    for path in sys.argv[1:]:
        report(path, a)


if __name__ == "__main__":
    main()

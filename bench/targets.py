#!/usr/bin/env python3
"""The issue's targets, measured: one spark-bench JSON without PDL and one with it.

Usage: bench/targets.py RESULT.json RESULT-pdl.json
Prints, per target, the range over its rows for each run, so BENCHMARKS.md's headline
table can be filled from the same files it cites.
"""
import json
import sys


def load(path):
    with open(path) as f:
        d = json.load(f)
    return {(r["H"], r["K"], r["M"], r["weights"], r["out"]): r for r in d["rows"] if r.get("status") == "ok"}


def rng(values, fmt="{:.2f}"):
    values = list(values)
    if not values:
        return "n/a"
    return (fmt + "–" + fmt).format(min(values), max(values))


def report(rows):
    out = {}
    dec = {k: r for k, r in rows.items() if k[0] in (8, 11, 16) and k[2] <= 32}
    out["decode bf16 weights, bf16 out / staged"] = rng(r["ratio"] for k, r in dec.items() if k[3:] == ("bf16", "bf16"))
    out["decode bf16 weights, e4m3 out / staged"] = rng(r["ratio"] for k, r in dec.items() if k[3:] == ("bf16", "e4m3"))
    out["decode MXFP8 weights, bf16 out / staged"] = rng(r["ratio"] for k, r in dec.items() if k[3:] == ("mxfp8", "bf16"))
    over = sorted(f"H={k[0]} K={k[1]} M={k[2]}: {r['ratio']:.3f}" for k, r in dec.items()
                  if k[3:] == ("bf16", "bf16") and r["ratio"] > 0.5)
    out["decode bf16/bf16 rows above 0.5"] = f"{len(over)}: " + "; ".join(over)
    h8 = [r["spark_us"] for k, r in rows.items() if k[0] == 8 and k[2] <= 16 and k[3] == "bf16"]
    out["H=8, M<=16, bf16 weights, us"] = rng(h8)
    for K in (128, 192):
        for ms, label in (((1, 2, 4, 8, 16), "M<=16"), ((32,), "M=32")):
            v = [r["spark_us"] / r["floor_us"] for k, r in rows.items()
                 if k[0] == 128 and k[1] == K and k[2] in ms and k[3] == "bf16"]
            out[f"H=128 K={K} {label} bf16 weights / floor"] = rng(v)
    for o in ("bf16", "e4m3"):
        v = [r["fraction_of_ceiling"] for k, r in rows.items() if k[0] >= 64 and k[2] >= 64 and k[3] == "bf16" and k[4] == o]
        out[f"H>=64 M>=64 bf16 weights, {o} out, fraction of ceiling"] = rng(v, "{:.0%}")
    ratios = [rows[k]["spark_us"] / rows[(k[0], k[1], k[2], "bf16", k[4])]["spark_us"]
              for k in rows if k[0] == 128 and k[2] <= 64 and k[3] == "mxfp8" and (k[0], k[1], k[2], "bf16", k[4]) in rows]
    out["H=128 M<=64 MXFP8 / bf16-weight time"] = rng(ratios)
    slow = sorted(((r["ratio"], k) for k, r in rows.items() if r["ratio"] > 1.0), reverse=True)
    out["rows slower than staged"] = f"{len(slow)} of {len(rows)}: " + "; ".join(
        f"H={k[0]} K={k[1]} M={k[2]} {k[3]}/{k[4]} {x:.3f}" for x, k in slow)
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    base, pdl = report(load(sys.argv[1])), report(load(sys.argv[2]))
    for name in base:
        print(f"{name}\n  PDL off: {base[name]}\n  PDL on:  {pdl[name]}")


if __name__ == "__main__":
    main()

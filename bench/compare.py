#!/usr/bin/env python3
"""spark's time per row, one tree against another: the "nothing slower" check.

Usage: bench/compare.py OLD.json[,OLD2.json...] NEW.json[,NEW2.json...] [--over 1.03]
Rows present in both sides are matched by (H, K, M, weights, out, out_pitch); where a side
lists several files (repeated runs) its median spark time per row is used.  Prints each
row's new / old ratio, then the median and range over all rows and the rows above --over.
Exit status 0 always: the numbers are for reading, not for gating.
"""
import argparse
import json
import statistics

CONTIGUOUS = 576  # out's row pitch when its rows are unpadded (files from before out_pitch)


def load(paths):
    rows = {}
    for path in paths.split(","):
        with open(path) as f:
            for r in json.load(f)["rows"]:
                if r.get("status") != "ok":
                    continue
                key = (r["H"], r["K"], r["M"], r["weights"], r["out"], r.get("out_pitch", CONTIGUOUS))
                rows.setdefault(key, []).append(r["spark_us"])
    return {k: statistics.median(v) for k, v in rows.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--over", type=float, default=1.03, help="list rows whose ratio exceeds this")
    args = ap.parse_args()
    old, new = load(args.old), load(args.new)
    shared = sorted(set(old) & set(new))
    if not shared:
        print("no rows in common")
        return
    ratios = {k: new[k] / old[k] for k in shared}
    for k in shared:
        h, kk, m, w, out, pitch = k
        print(f"H={h:3d} K={kk} M={m:4d} {w:9s} {out:4s} pitch={pitch}  {old[k]:9.2f} -> {new[k]:9.2f} us"
              f"  x{ratios[k]:.3f}")
    values = list(ratios.values())
    print(f"\n{len(values)} rows: median {statistics.median(values):.4f}, range {min(values):.3f}-{max(values):.3f}")
    slow = [k for k in shared if ratios[k] > args.over]
    print(f"rows above {args.over}: {len(slow)}")
    for k in slow:
        print(f"  {k}: x{ratios[k]:.3f}")


if __name__ == "__main__":
    main()

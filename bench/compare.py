#!/usr/bin/env python3
"""spark's time per row, one tree against another: the "nothing slower" check.

Usage: bench/compare.py OLD.json[,OLD2.json...] NEW.json[,NEW2.json...] [--over 1.03]
Rows present in both sides are matched by op and key (bench/rows.py: (H, K, M, weights, out,
out_pitch) for the query projection, (H, V, M, weights, out, out_pad) for --op oproj); where a
side lists several files (repeated runs) its median spark time per row is used.  Prints each
row's new / old ratio, then per op the median and range over all rows and the rows above --over.
Exit status 0 always: the numbers are for reading, not for gating.
"""
import argparse
import statistics

import rows as bench_rows


def load(paths):
    """{(op, key): median spark_us} over the files of one side."""
    _, rows = bench_rows.read(paths)
    return {(op, k): statistics.median(r["spark_us"] for r in rs)
            for op, by_key in rows.items() for k, rs in by_key.items()}


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
    for op, k in shared:
        print(f"{op} {bench_rows.name(op, k):24s} {k[3]:9s} {k[4]:4s}  {old[op, k]:9.2f} -> {new[op, k]:9.2f} us"
              f"  x{ratios[op, k]:.3f}")
    for op in bench_rows.OPS:
        mine = [k for k in shared if k[0] == op]
        if not mine:
            continue
        values = [ratios[k] for k in mine]
        slow = [k for k in mine if ratios[k] > args.over]
        print(f"\n{op}: {len(values)} rows: median {statistics.median(values):.4f}, "
              f"range {min(values):.3f}-{max(values):.3f}")
        print(f"rows above {args.over}: {len(slow)}")
        for o, k in slow:
            print(f"  {bench_rows.name(o, k)} {k[3]}/{k[4]}: x{ratios[o, k]:.3f}")


if __name__ == "__main__":
    main()

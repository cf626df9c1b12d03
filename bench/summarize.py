#!/usr/bin/env python3
"""Markdown table of a spark-bench JSON (optionally with a --pdl run beside it).

Usage: bench/summarize.py RESULT.json [RESULT-pdl.json] [--op qproj|oproj]; either file may be a
comma-separated list of files whose rows are taken together (a grid run in parts; the header is
the first file's).  Rows are keyed as bench/rows.py says: (H, K, M, weights, out, out_pitch) for
the query projection, (H, V, M, weights, out, out_pad) for the value up-projection.  The op is
the one the files hold (the query projection's where they hold both, unless --op says).  The
pitch or pad column is shown only when a row is padded.
"""
import argparse

import rows as bench_rows

SHOWN_M = (1, 4, 16, 32, 64, 256, 1024, 4096, 8192)
SHOWN_H = {"qproj": (8, 11, 16, 64, 128), "oproj": (8, 16, 64, 128)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("result")
    ap.add_argument("pdl", nargs="?")
    ap.add_argument("--op", choices=bench_rows.OPS, help="the op to tabulate (default: the one the files hold)")
    args = ap.parse_args()
    base, rows = bench_rows.read(args.result)
    rows = bench_rows.latest(rows)
    pdl = bench_rows.latest(bench_rows.read(args.pdl)[1]) if args.pdl else {op: {} for op in bench_rows.OPS}
    op = args.op or ("qproj" if rows["qproj"] or not rows["oproj"] else "oproj")
    rows, pdl = rows[op], pdl[op]
    padded = any(bench_rows.padded(op, k) for k in rows)
    gpu = base["gpu"]["name"] if isinstance(base["gpu"], dict) else base["gpu"]
    print(f"GPU {gpu}, driver {base['driver_version']}, commit {base['commit']}, {base['date']}, "
          f"copy ceiling {base['ceiling_tbps']:.2f} TB/s\n")
    dim, pad = ("V", "pad") if op == "oproj" else ("K", "pitch")
    pad_hdr = f" {pad} |" if padded else ""
    hdr = (f"| H | {dim} | M | weights | out |{pad_hdr} staged µs | spark µs | ratio | spark+PDL µs | ratio | floor µs "
           "| frac of ceiling |")
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for k in sorted(rows):
        H, D, M, w, o, p = k
        if M not in SHOWN_M or H not in SHOWN_H[op]:
            continue
        r = rows[k]
        q = pdl.get(k)
        pcol = f"{q['spark_us']:.2f} | {q['ratio']:.2f}" if q else "– | –"
        pad_col = f" {p} |" if padded else ""
        print(f"| {H} | {D} | {M} | {w} | {o} |{pad_col} {r['staged_us']:.2f} | {r['spark_us']:.2f} | "
              f"{r['ratio']:.2f} | {pcol} | {r['floor_us']:.2f} | {r['fraction_of_ceiling']:.2f} |")


if __name__ == "__main__":
    main()

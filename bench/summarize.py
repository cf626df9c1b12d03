#!/usr/bin/env python3
"""Markdown table of a spark-bench JSON (optionally with a --pdl run beside it).

Usage: bench/summarize.py RESULT.json [RESULT-pdl.json]; either may be a comma-separated list of
files whose rows are taken together (a grid run in parts; the header is the first file's).
Rows are keyed by (H, K, M, weights, out, out_pitch); files written before out_pitch existed
read as pitch 576 (contiguous rows).  The pitch column is shown only when a row is padded.
"""
import json
import sys

CONTIGUOUS = 576  # N + R: out's row pitch when its rows are unpadded


def key(r):
    return (r["H"], r["K"], r["M"], r["weights"], r["out"], r.get("out_pitch", CONTIGUOUS))


def load(paths):
    first, rows = None, {}
    for path in paths.split(","):
        with open(path) as f:
            d = json.load(f)
        first = first or d
        rows.update({key(r): r for r in d["rows"] if r.get("status") == "ok"})
    return first, rows


def main():
    base, rows = load(sys.argv[1])
    pdl = load(sys.argv[2])[1] if len(sys.argv) > 2 else {}
    padded = any(k[5] != CONTIGUOUS for k in rows)
    print(f"GPU {base['gpu']['name'] if isinstance(base['gpu'], dict) else base['gpu']}, driver {base['driver_version']}, "
          f"commit {base['commit']}, {base['date']}, copy ceiling {base['ceiling_tbps']:.2f} TB/s\n")
    pitch_hdr = " pitch |" if padded else ""
    hdr = (f"| H | K | M | weights | out |{pitch_hdr} staged µs | spark µs | ratio | spark+PDL µs | ratio | floor µs "
           "| frac of ceiling |")
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for k in sorted(rows):
        H, K, M, w, o, pitch = k
        if M not in (1, 4, 16, 32, 64, 256, 1024, 4096, 8192) or H not in (8, 11, 16, 64, 128):
            continue
        r = rows[k]
        p = pdl.get(k)
        pcol = f"{p['spark_us']:.2f} | {p['ratio']:.2f}" if p else "– | –"
        pitch_col = f" {pitch} |" if padded else ""
        print(f"| {H} | {K} | {M} | {w} | {o} |{pitch_col} {r['staged_us']:.2f} | {r['spark_us']:.2f} | "
              f"{r['ratio']:.2f} | {pcol} | {r['floor_us']:.2f} | {r['fraction_of_ceiling']:.2f} |")


if __name__ == "__main__":
    main()

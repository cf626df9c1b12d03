#!/usr/bin/env python3
"""Markdown table of a spark-bench JSON (optionally with a --pdl run beside it)."""
import json
import sys


def load(path):
    with open(path) as f:
        d = json.load(f)
    return d, {(r["H"], r["K"], r["M"], r["weights"], r["out"]): r for r in d["rows"] if r.get("status") == "ok"}


def main():
    base, rows = load(sys.argv[1])
    pdl = load(sys.argv[2])[1] if len(sys.argv) > 2 else {}
    print(f"GPU {base['gpu']['name'] if isinstance(base['gpu'], dict) else base['gpu']}, driver {base['driver_version']}, "
          f"commit {base['commit']}, {base['date']}, copy ceiling {base['ceiling_tbps']:.2f} TB/s\n")
    hdr = "| H | K | M | weights | out | staged µs | spark µs | ratio | spark+PDL µs | ratio | floor µs | frac of ceiling |"
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for key in sorted(rows):
        H, K, M, w, o = key
        if M not in (1, 4, 16, 32, 64, 256, 1024) or H not in (8, 11, 16, 64, 128):
            continue
        r = rows[key]
        p = pdl.get(key)
        pcol = f"{p['spark_us']:.2f} | {p['ratio']:.2f}" if p else "– | –"
        print(f"| {H} | {K} | {M} | {w} | {o} | {r['staged_us']:.2f} | {r['spark_us']:.2f} | {r['ratio']:.2f} | "
              f"{pcol} | {r['floor_us']:.2f} | {r['fraction_of_ceiling']:.2f} |")


if __name__ == "__main__":
    main()

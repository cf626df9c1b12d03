#!/usr/bin/env python3
"""The issue's targets, measured: one spark-bench JSON without PDL and one with it.

Usage: bench/targets.py RESULT.json RESULT-pdl.json
Prints, per target, the range over its rows for each run, so BENCHMARKS.md's headline
table can be filled from the same files it cites (docs/benchmarks.md states the targets).
Either argument may be a comma-separated list of files whose rows are taken together (a grid
run in parts, e.g. one per --out-pitch).
Rows are keyed as bench/rows.py says; files written before block FP8 existed simply have no
fp8-block rows.  Value up-projection rows (spark-bench --op oproj) get their own targets, after
the query projection's when a file has both.
"""
import sys

import rows as bench_rows

SECTOR_BYTES = 32     # a DRAM sector: a row pitch of whole sectors keeps every row start aligned
FP8_FORMATS = ("mxfp8", "fp8-block")


def load(paths):
    """The measured rows: (query projection's, value up-projection's), the last file's where
    several measured a row."""
    rows = bench_rows.latest(bench_rows.read(paths)[1])
    return rows["qproj"], rows["oproj"]


def rng(values, fmt="{:.2f}"):
    values = list(values)
    if not values:
        return "n/a"
    return (fmt + "–" + fmt).format(min(values), max(values))


def aligned(k):
    return k[5] * (2 if k[4] == "bf16" else 1) % SECTOR_BYTES == 0


def name(k):
    return bench_rows.name("qproj", k)


def over_bf16(rows, fmt, keep):
    """spark_us(fmt weights) / spark_us(bf16 weights) of the same (H, K, M, out, pitch)."""
    twin = lambda k: k[:3] + ("bf16",) + k[4:]
    return [r["spark_us"] / rows[twin(k)]["spark_us"] for k, r in rows.items()
            if k[3] == fmt and keep(k) and twin(k) in rows]


def fp8_report(rows, out):
    for fmt in FP8_FORMATS:
        out[f"{fmt}: H=128 M<=16 time / bf16-weight time"] = rng(over_bf16(rows, fmt, lambda k: k[0] == 128 and k[2] <= 16))
        out[f"{fmt}: H=128 M<=16 time / own floor"] = rng(
            r["spark_us"] / r["floor_us"] for k, r in rows.items() if k[3] == fmt and k[0] == 128 and k[2] <= 16)
        out[f"{fmt}: H>=64 M<=64 time / bf16-weight time"] = rng(over_bf16(rows, fmt, lambda k: k[0] >= 64 and k[2] <= 64))
        out[f"{fmt}: H<32 M<=16 time / bf16-weight time"] = rng(over_bf16(rows, fmt, lambda k: k[0] < 32 and k[2] <= 16))
        out[f"{fmt}: M>=256 time / bf16-weight time"] = rng(over_bf16(rows, fmt, lambda k: k[2] >= 256))


def large_m_report(rows, out):
    big = {k: r for k, r in rows.items() if k[0] >= 32 and k[2] >= 256 and k[3] == "bf16"}
    for label, keep in (("bf16 out, aligned pitch", lambda k: k[4] == "bf16" and aligned(k)),
                        ("bf16 out, unaligned pitch", lambda k: k[4] == "bf16" and not aligned(k)),
                        ("e4m3 out", lambda k: k[4] == "e4m3")):
        sel = {k: r for k, r in big.items() if keep(k)}
        pitches = ",".join(str(p) for p in sorted({k[5] for k in sel}))
        value = rng((r["fraction_of_ceiling"] for r in sel.values()), "{:.0%}")
        out[f"H>=32 M>=256 bf16 weights, {label}, fraction of ceiling"] = (
            f"{value} (pitch {pitches})" if sel else value)


def report(rows):
    out = {}
    dec = {k: r for k, r in rows.items() if k[0] in (8, 11, 16) and k[2] <= 32}
    out["decode bf16 weights, bf16 out / staged"] = rng(r["ratio"] for k, r in dec.items() if k[3:5] == ("bf16", "bf16"))
    out["decode bf16 weights, e4m3 out / staged"] = rng(r["ratio"] for k, r in dec.items() if k[3:5] == ("bf16", "e4m3"))
    out["decode MXFP8 weights, bf16 out / staged"] = rng(r["ratio"] for k, r in dec.items() if k[3:5] == ("mxfp8", "bf16"))
    out["decode block-FP8 weights, bf16 out / staged"] = rng(
        r["ratio"] for k, r in dec.items() if k[3:5] == ("fp8-block", "bf16"))
    over = sorted(f"{name(k)}: {r['ratio']:.3f}" for k, r in dec.items()
                  if k[3:5] == ("bf16", "bf16") and r["ratio"] > 0.5)
    out["decode bf16/bf16 rows above 0.5"] = f"{len(over)}: " + "; ".join(over)
    h8 = [r["spark_us"] for k, r in rows.items() if k[0] == 8 and k[2] <= 16 and k[3] == "bf16"]
    out["H=8, M<=16, bf16 weights, us"] = rng(h8)
    for K in (128, 192):
        for ms, label in (((1, 2, 4, 8, 16), "M<=16"), ((32,), "M=32")):
            v = [r["spark_us"] / r["floor_us"] for k, r in rows.items()
                 if k[0] == 128 and k[1] == K and k[2] in ms and k[3] == "bf16"]
            out[f"H=128 K={K} {label} bf16 weights / floor"] = rng(v)
    for o in ("bf16", "e4m3"):
        v = [r["fraction_of_ceiling"] for k, r in rows.items()
             if k[0] >= 64 and k[2] >= 64 and k[3] == "bf16" and k[4] == o and aligned(k)]
        out[f"H>=64 M>=64 bf16 weights, {o} out, fraction of ceiling"] = rng(v, "{:.0%}")
    large_m_report(rows, out)
    fp8_report(rows, out)
    slow = sorted(((r["ratio"], k) for k, r in rows.items() if r["ratio"] > 1.0), reverse=True)
    out["rows slower than staged"] = f"{len(slow)} of {len(rows)}: " + "; ".join(
        f"{name(k)} {k[3]}/{k[4]} {x:.3f}" for x, k in slow)
    return out


def oproj_name(k):
    return bench_rows.name("oproj", k)


def oproj_report(rows):
    """The value up-projection's targets (docs/benchmarks.md)."""
    out = {}
    dec = {k: r for k, r in rows.items() if k[0] <= 16 and k[2] <= 32 and k[3] == "bf16"}
    for o in ("bf16", "e4m3"):
        out[f"decode H<=16 M<=32 bf16 weights, {o} out / staged (<= 0.5)"] = rng(
            r["ratio"] for k, r in dec.items() if k[4] == o)
    over = sorted(f"{oproj_name(k)} {k[4]}: {r['ratio']:.3f}" for k, r in dec.items() if r["ratio"] > 0.5)
    out["decode rows above 0.5"] = f"{len(over)}: " + "; ".join(over)
    for V in (128, 256):
        v = [r["spark_us"] / r["floor_us"] for k, r in rows.items()
             if k[0] == 128 and k[1] == V and k[2] <= 32 and k[3] == "bf16"]
        out[f"H=128 V={V} M<=32 bf16 weights / floor (<= 1.3)"] = rng(v)
    for o in ("bf16", "e4m3"):
        v = [r["fraction_of_ceiling"] for k, r in rows.items()
             if k[0] >= 32 and k[2] >= 256 and k[3] == "bf16" and k[4] == o]
        out[f"H>=32 M>=256 bf16 weights, {o} out, fraction of ceiling (>= 80%)"] = rng(v, "{:.0%}")
    for fmt in FP8_FORMATS:
        out[f"{fmt}: H=128 M<=16 time / own floor (<= 1.3)"] = rng(
            r["spark_us"] / r["floor_us"] for k, r in rows.items() if k[3] == fmt and k[0] == 128 and k[2] <= 16)
        out[f"{fmt}: H=128 M<=16 time / bf16-weight time"] = rng(
            over_bf16(rows, fmt, lambda k: k[0] == 128 and k[2] <= 16))
    slow = sorted(((r["ratio"], k) for k, r in rows.items() if r["ratio"] > 1.0), reverse=True)
    out["rows slower than staged"] = f"{len(slow)} of {len(rows)}: " + "; ".join(
        f"{oproj_name(k)} {k[3]}/{k[4]} {x:.3f}" for x, k in slow)
    return out


def show(base, pdl):
    for label in base:
        print(f"{label}\n  PDL off: {base[label]}\n  PDL on:  {pdl[label]}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    (base, base_o), (pdl, pdl_o) = load(sys.argv[1]), load(sys.argv[2])
    if base or pdl or not (base_o or pdl_o):
        show(report(base), report(pdl))
    if base_o or pdl_o:
        if base or pdl:
            print("\nvalue up-projection (--op oproj)")
        show(oproj_report(base_o), oproj_report(pdl_o))


if __name__ == "__main__":
    main()

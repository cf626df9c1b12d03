#!/usr/bin/env python3
"""The PDL grid as the auto schedule of the commit after 1536732 picks its kernels.

h100-1536732/grid-pdl.json ran the first auto thresholds (stationary past M = 16 from 32
(head, 128 columns) blocks, 64 at M 17-32). The thresholds that replaced them take, per row,
a kernel the same session timed on the same machine in another step (the M = 32 sweep, the
past-decode runs with one schedule forced), or, for 8-16 heads at M 4096-8192 with the
stationary kernel, the earlier H100 run of h100-7543030 (same kernel source). Each output row
keeps its own staged time (measured beside it) and names its source.

    python3 compose.py > h100-1536732/grid-pdl-auto.json
"""
import json
import os

here = os.path.dirname(os.path.abspath(__file__))


def rows(path):
    with open(os.path.join(here, path)) as f:
        return {(r["H"], r["V"], r["M"], r["weights"], r["out"]): r for r in json.load(f)["rows"]}


def kernel(h, v, m, w):
    """The new auto rule on sm_90a: 'tiled', 'ring' or 'stationary'."""
    if m <= 16:
        return "tiled"
    blocks, fp8 = h * v // 128, 2 if w != "bf16" else 1
    if m <= 32:
        return "stationary" if blocks >= 64 * fp8 else "ring"
    if m <= 64:
        return "stationary" if blocks >= 32 * fp8 else "tiled"
    return "stationary"


def which(r):
    k = r.get("kernel", "")
    return "stationary" if "wgmma" in k else "ring" if "ring" in k else "tiled"


grid = json.load(open(os.path.join(here, "h100-1536732/grid-pdl.json")))
sources = {
    "h100-1536732/m32/sweep-ring.json": rows("h100-1536732/m32/sweep-ring.json"),
    "h100-1536732/m32/sweep-wg.json": rows("h100-1536732/m32/sweep-wg.json"),
    "h100-1536732/past-tiled-pdl.json": rows("h100-1536732/past-tiled-pdl.json"),
    "h100-1536732/past-stationary-pdl.json": rows("h100-1536732/past-stationary-pdl.json"),
    "h100-7543030/stationary-h8-16-pdl.json": rows("h100-7543030/stationary-h8-16-pdl.json"),
}
out_rows = []
for r in grid["rows"]:
    key = (r["H"], r["V"], r["M"], r["weights"], r["out"])
    want = kernel(r["H"], r["V"], r["M"], r["weights"])
    if which(r) == want:
        out_rows.append(dict(r, source="h100-1536732/grid-pdl.json"))
        continue
    for name, table in sources.items():
        alt = table.get(key)
        if alt and which(alt) == want:
            out_rows.append(dict(alt, source=name))
            break
    else:
        raise SystemExit(f"no {want} row for {key}")
grid["rows"] = out_rows
grid["composed"] = __doc__.strip().splitlines()[0]
grid.pop("summary", None)
print(json.dumps(grid, indent=1))

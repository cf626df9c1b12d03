"""Reading spark-bench JSON files: the measured rows of each op, keyed the same way by every script.

Query-projection rows ("op" absent or "qproj") are keyed by (H, K, M, weights, out, out_pitch);
files written before out_pitch existed read as pitch 576 (contiguous rows).  Value up-projection
rows ("op": "oproj") are keyed by (H, V, M, weights, out, out_pad), and one list of files holds
rows of one staged baseline (staged_bmm).  Rows whose status is not "ok" (unsupported, failed)
are left out.
"""
import json
import sys

CONTIGUOUS = 576  # N + R: the query projection's out row pitch when its rows are unpadded
OPS = ("qproj", "oproj")


def op_of(row):
    return row.get("op", "qproj")


def key(row):
    if op_of(row) == "oproj":
        return (row["H"], row["V"], row["M"], row["weights"], row["out"], row.get("out_pad", 0))
    return (row["H"], row["K"], row["M"], row["weights"], row["out"], row.get("out_pitch", CONTIGUOUS))


def padded(op, k):
    """Whether out's rows have elements past the op's own columns."""
    return k[5] != (0 if op == "oproj" else CONTIGUOUS)


def name(op, k):
    """A row's name: H, the op's second dimension and M, then the pitch or pad where rows are padded."""
    if op == "oproj":
        s = f"H={k[0]} V={k[1]} M={k[2]}"
        return f"{s} pad={k[5]}" if padded(op, k) else s
    s = f"H={k[0]} K={k[1]} M={k[2]}"
    return f"{s} pitch={k[5]}" if padded(op, k) else s


def read(paths):
    """The first file's header and {op: {key: [rows...]}} over a comma-separated list of files
    (repeated runs or a grid run in parts); a key measured in several files keeps every row.
    Value up-projection rows staged two ways (spark-bench --staged-bmm copy and into: their
    ratios are against different baselines) are not taken together: that exits naming both."""
    first, rows, staged = None, {op: {} for op in OPS}, {}
    for path in paths.split(","):
        with open(path) as f:
            d = json.load(f)
        first = first or d
        for r in d["rows"]:
            if r.get("status") == "ok":
                rows[op_of(r)].setdefault(key(r), []).append(r)
                if op_of(r) == "oproj":
                    staged.setdefault(r.get("staged_bmm", "copy"), path)
    if len(staged) > 1:
        sys.exit(f"{paths}: value up-projection rows staged with --staged-bmm "
                 + " and ".join(f"{bmm} ({path})" for bmm, path in sorted(staged.items()))
                 + ": their ratios are against different baselines; give one kind per argument")
    return first, rows


def latest(rows):
    """{op: {key: row}}, the last file's row where several files measured a key."""
    return {op: {k: v[-1] for k, v in by_key.items()} for op, by_key in rows.items()}

"""Per-CTA phases of spark's value up-projection in a PDL chain, from the stamps that
oproj_timeline.cu writes with a CSV path (its second argument):

    python3 bench/micro/oproj_phases.py STAMPS.csv[.gz] [...]

For each key of the file (V, M, weights, PDL), every CTA of each layer that follows another
(layers 1-4 of the five dumped) is read against the previous layer's last exit (t = 0): when
its stamps fall (entry, release past the PDL wait, landed = thread 0's own weight copies,
MMAs done, exit), and how long its phases take: entry to landed, waiting for its weights past
the release, the work (o and the MMAs once both are there) and the sum and store (MMAs done
to exit).  spark's kernel
waits for its copies after the PDL wait, so with PDL "landed" is never before the release and
"entry to landed" includes the wait for it: it is the fetch's time only with PDL off.  Each
is printed as p10 / p50 / p90 / max over the CTAs of the four layers, in us; `gap` is the
completion-to-release gap (the previous layer's last exit to this layer's first release) and
`span` the release-to-last-exit time, each the upper median over the layers as in
timeline.h (gap + span is that layer's period, E(l) - E(l-1)).  Standard library only.
"""
import csv
import gzip
import os
import sys
from collections import defaultdict

STAMPS = ("entry", "release", "landed", "mma", "exit")
PHASES = (
    ("entry to landed", lambda c: c["landed"] - c["entry"]),
    ("wait for weights", lambda c: max(0, c["landed"] - c["release"])),
    ("work", lambda c: c["mma"] - max(c["release"], c["landed"])),
    ("sum and store", lambda c: c["exit"] - c["mma"]),
)


def quantile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def spread(values):
    return "%6.2f %6.2f %6.2f %6.2f" % (quantile(values, 0.1), quantile(values, 0.5), quantile(values, 0.9),
                                        max(values))


def read(path):
    keys = defaultdict(lambda: defaultdict(list))
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        for row in csv.DictReader(f):
            key = (int(row["v"]), int(row["m"]), row["weights"], "on" if row["pdl"] == "1" else "off")
            keys[key][int(row["layer"])].append({name: int(row[name]) for name in STAMPS})
    return keys


def report(path):
    print(f"== {os.path.basename(path)}")
    for key, layers in read(path).items():
        order = sorted(layers)
        pairs = [(a, b) for a, b in zip(order, order[1:]) if b == a + 1]
        if not pairs:
            print(f"V = {key[0]}, M = {key[1]}, {key[2]}, PDL {key[3]}: no two consecutive layers, skipped")
            continue
        at = defaultdict(list)  # stamp -> us after the previous layer's last exit
        phase = defaultdict(list)
        gaps, spans = [], []
        for before, layer in pairs:
            prev_exit = max(c["exit"] for c in layers[before])
            ctas = layers[layer]
            first_release = min(c["release"] for c in ctas)
            gaps.append((first_release - prev_exit) / 1e3)
            spans.append((max(c["exit"] for c in ctas) - first_release) / 1e3)
            for c in ctas:
                for name in STAMPS:
                    at[name].append((c[name] - prev_exit) / 1e3)
                for name, of in PHASES:
                    phase[name].append(of(c) / 1e3)
        v, m, weights, pdl = key
        print(f"V = {v}, M = {m}, {weights}, PDL {pdl}: gap {quantile(gaps, 0.5):.2f} us, "
              f"span {quantile(spans, 0.5):.2f} us")
        print("  %-18s %6s %6s %6s %6s" % ("us", "p10", "p50", "p90", "max"))
        for name in STAMPS:
            print("  %-18s %s" % (name + " at", spread(at[name])))
        for name, _ in PHASES:
            print("  %-18s %s" % (name, spread(phase[name])))


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for path in argv[1:]:
        report(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

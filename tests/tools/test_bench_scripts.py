"""bench/compare.py, summarize.py and targets.py on spark-bench files that hold both ops' rows,
micro/oproj_phases.py on a made-up stamps file,
bench/run-oproj.sh's steps on stand-in tools, and bench/build-variant.sh in a scratch git
repository with a stand-in cmake.

Run by ctest (python3 tests/tools/test_bench_scripts.py); needs only the standard library.
The rows are made up here in spark-bench's JSON layout, so the expected numbers are known.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")


def qrow(h, k, m, spark, weights="bf16", out="bf16", pitch=576, status="ok"):
    return {"H": h, "K": k, "M": m, "weights": weights, "out": out, "out_pitch": pitch, "status": status,
            "floor_us": 2.0, "spark_us": spark, "staged_us": 2 * spark, "ratio": 0.5, "fraction_of_ceiling": 2.0 / spark}


def orow(h, v, m, spark, weights="bf16", out="bf16", pad=0, staged=None, floor=2.0, status="ok"):
    staged = staged or 2 * spark
    return {"op": "oproj", "H": h, "V": v, "M": m, "weights": weights, "out": out, "out_pitch": h * v + pad,
            "out_pad": pad, "status": status, "floor_us": floor, "spark_us": spark, "staged_us": staged,
            "ratio": spark / staged, "fraction_of_ceiling": floor / spark}


def header(rows):
    return {"gpu": {"name": "test GPU"}, "driver_version": "0", "commit": "abc", "date": "2026-12-04",
            "ceiling_tbps": 4.0, "rows": rows}


class BenchScripts(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def file(self, name, rows):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            json.dump(header(rows), f)
        return path

    def run_script(self, script, *args):
        done = subprocess.run([sys.executable, os.path.join(BENCH, script), *args], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout

    def test_compare_matches_each_op_by_its_own_key(self):
        # The same (H, second dimension, M) in both ops must not be matched across ops.
        old = self.file("old.json", [qrow(8, 128, 1, 4.0), orow(8, 128, 1, 8.0),
                                     orow(8, 128, 1, 1.0, status="unsupported")])
        # Two new files: the median of 3.0 and 5.0 is 4.0 -> ratio 0.5 for the oproj row.
        new1 = self.file("new1.json", [qrow(8, 128, 1, 2.0), orow(8, 128, 1, 3.0)])
        new2 = self.file("new2.json", [orow(8, 128, 1, 5.0), orow(8, 128, 1, 9.0, pad=8)])
        out = self.run_script("compare.py", old, f"{new1},{new2}", "--over", "0.4")
        self.assertIn("qproj H=8 K=128 M=1", out)
        self.assertIn("oproj H=8 V=128 M=1", out)
        self.assertIn("qproj: 1 rows: median 0.5000", out)
        self.assertIn("oproj: 1 rows: median 0.5000", out)  # the pad=8 row has no old twin
        self.assertIn("H=8 V=128 M=1 bf16/bf16: x0.500", out)

    def test_summarize_tabulates_the_op_the_files_hold(self):
        base = self.file("o.json", [orow(8, 256, 1, 3.0), orow(128, 128, 16, 8.0, pad=8)])
        pdl = self.file("o-pdl.json", [orow(8, 256, 1, 2.0)])
        out = self.run_script("summarize.py", base, pdl)
        self.assertIn("| H | V | M | weights | out | pad |", out)
        self.assertIn("| 8 | 256 | 1 | bf16 | bf16 | 0 | 6.00 | 3.00 | 0.50 | 2.00 | 0.50 | 2.00 | 0.67 |", out)
        self.assertIn("| 128 | 128 | 16 | bf16 | bf16 | 8 | 16.00 | 8.00 | 0.50 | – | – | 2.00 | 0.25 |", out)
        both = self.file("both.json", [qrow(8, 192, 1, 3.0), orow(8, 256, 1, 3.0)])
        self.assertIn("| H | K | M |", self.run_script("summarize.py", both))
        self.assertIn("| H | V | M |", self.run_script("summarize.py", both, "--op", "oproj"))

    def test_staged_baselines_are_not_mixed(self):
        copy = self.file("copy.json", [orow(8, 128, 1, 2.0)])
        into = self.file("into.json", [dict(orow(8, 128, 16, 2.0), staged_bmm="into")])
        done = subprocess.run([sys.executable, os.path.join(BENCH, "summarize.py"), f"{copy},{into}"],
                              capture_output=True, text=True)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("--staged-bmm copy", done.stderr)
        self.assertIn("into (", done.stderr)
        self.assertIn("| 8 | 128 | 16 |", self.run_script("summarize.py", into))  # one kind: fine

    def test_targets_reports_the_value_up_projection(self):
        rows = [orow(8, 128, 1, 2.0, staged=5.0), orow(16, 256, 32, 3.0, out="e4m3", staged=5.0),
                orow(128, 128, 1, 5.0, floor=4.0), orow(128, 128, 16, 3.0, weights="mxfp8", floor=2.0),
                orow(128, 128, 16, 6.0, floor=4.0), orow(64, 128, 4096, 100.0, floor=90.0, staged=120.0)]
        base, pdl = self.file("t.json", rows), self.file("t-pdl.json", rows[:3])
        out = self.run_script("targets.py", base, pdl)
        self.assertNotIn("decode bf16 weights, bf16 out / staged", out)  # no query-projection rows
        self.assertIn("decode H<=16 M<=32 bf16 weights, bf16 out / staged (<= 0.5)\n  PDL off: 0.40–0.40", out)
        self.assertIn("decode rows above 0.5\n  PDL off: 1: H=16 V=256 M=32 e4m3: 0.600", out)
        self.assertIn("H=128 V=128 M<=32 bf16 weights / floor (<= 1.3)\n  PDL off: 1.25–1.50", out)
        self.assertIn("mxfp8: H=128 M<=16 time / own floor (<= 1.3)\n  PDL off: 1.50–1.50\n  PDL on:  n/a", out)
        self.assertIn("mxfp8: H=128 M<=16 time / bf16-weight time\n  PDL off: 0.50–0.50", out)
        self.assertIn("bf16 out, fraction of ceiling (>= 80%)\n  PDL off: 90%–90%", out)

    def test_oproj_phases_reads_each_cta_against_the_previous_layer(self):
        # Three layers of two CTAs (ns).  Layer 0 ends at 1000; layer 1's CTAs are released at
        # 1500 and 1600, land at 1500 and 2000, finish their MMAs at 2500 and 3000 and exit at
        # 2700 and 3600; layer 2 is read against layer 1's last exit (3600), not layer 0's.  A
        # second key has one layer only.  Gzipped, as the results keep them.
        import gzip
        rows = ["v,m,weights,pdl,layer,cta,entry,release,landed,mma,exit,sm",
                 "128,1,fp8-block,1,0,0,0,100,200,800,900,0", "128,1,fp8-block,1,0,1,0,100,200,900,1000,1",
                 "128,1,fp8-block,1,1,0,200,1500,1500,2500,2700,0", "128,1,fp8-block,1,1,1,400,1600,2000,3000,3600,1",
                 "128,1,fp8-block,1,2,0,3000,4400,4400,5400,5600,0", "128,1,fp8-block,1,2,1,3000,4400,4400,5400,5600,1",
                 "256,16,mxfp8,0,0,0,0,100,200,800,900,0"]
        text = "\n".join(rows) + "\n"
        gz, plain = os.path.join(self.dir.name, "stamps.csv.gz"), os.path.join(self.dir.name, "stamps.csv")
        with gzip.open(gz, "wt") as f:
            f.write(text)
        with open(plain, "w") as f:
            f.write(text)
        out = self.run_script(os.path.join("micro", "oproj_phases.py"), gz)
        # gap 500 then 800, span 2100 then 1200: the upper median of two is the larger.
        self.assertIn("== stamps.csv.gz\nV = 128, M = 1, fp8-block, PDL on: gap 0.80 us, span 2.10 us", out)
        # Four CTAs (p10 / p50 / p90 / max): layer 1's two against 1000, layer 2's two against 3600.
        self.assertIn("entry at            -0.80  -0.60  -0.60  -0.60", out)
        self.assertIn("entry to landed      1.30   1.40   1.60   1.60", out)
        self.assertIn("wait for weights     0.00   0.00   0.40   0.40", out)
        self.assertIn("work                 1.00   1.00   1.00   1.00", out)
        self.assertIn("sum and store        0.20   0.20   0.60   0.60", out)
        self.assertIn("V = 256, M = 16, mxfp8, PDL off: no two consecutive layers, skipped", out)
        # A plain CSV reads the same.
        self.assertIn("gap 0.80 us, span 2.10 us", self.run_script(os.path.join("micro", "oproj_phases.py"), plain))

# A stand-in for spark-bench and spark-prewarm: prints its name, arguments and the tiling
# variables, and writes the --json file it is given.
STAND_IN = """#!/bin/sh
echo "$(basename "$0") $* SCHEDULE=${SPARK_OPROJ_SCHEDULE:-} TILES=${SPARK_OPROJ_TILES:-}"
while [ $# -gt 0 ]; do [ "$1" = --json ] && echo '{}' > "$2"; shift; done
"""


class RunOproj(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        tools = os.path.join(self.dir.name, "build", "tools")
        os.makedirs(tools)
        for name in ("spark-bench", "spark-prewarm"):
            path = os.path.join(tools, name)
            with open(path, "w") as f:
                f.write(STAND_IN)
            os.chmod(path, 0o755)
        self.out = os.path.join(self.dir.name, "out")

    def tearDown(self):
        self.dir.cleanup()

    def run_steps(self, *steps, hook=None):
        env = dict(os.environ, BUILD_DIR=os.path.join(self.dir.name, "build"))
        env.pop("SPARK_OPROJ_TILES", None)
        env.pop("SPARK_OPROJ_SCHEDULE", None)
        if hook:
            env["STEP_HOOK"] = hook
        return subprocess.run(["bash", os.path.join(BENCH, "run-oproj.sh"), self.out, *steps], capture_output=True,
                              text=True, env=env)

    def log(self, step):
        with open(os.path.join(self.out, step + ".log")) as f:
            return f.read()

    # A sweep step's checks: every table ran, `table` was announced, and the run of table
    # `name` was given `flags`.
    def check_sweep(self, step, tables, table, name, flags):
        sweep = self.log(step)
        self.assertEqual(sweep.count("rc=0"), tables)
        self.assertIn("== " + table, sweep)
        with open(os.path.join(self.out, step, "sweep-" + name + ".log")) as f:
            self.assertIn(flags, f.read())

    def test_steps_run_in_the_order_given_with_their_tilings(self):
        done = self.run_steps("past-tiled", "grid-pdl", "prewarm", "m32", hook="echo hooked")
        self.assertEqual(done.returncode, 0, done.stderr)
        lines = done.stdout.splitlines()
        self.assertEqual([line.split()[0] for line in lines if not line.startswith("hooked")],
                         ["past-tiled", "grid-pdl", "prewarm", "m32"])
        self.assertEqual(done.stdout.count("hooked"), 4)
        self.assertIn("--heads 8,16,32,64 --m 64,256,1024", self.log("past-tiled"))
        self.assertIn("SCHEDULE=tiled TILES=", self.log("past-tiled"))
        self.assertIn("--pdl --heads 8,16,32,64,128 --m 1,4,16,32,64,256,1024,4096,8192", self.log("grid-pdl"))
        self.assertIn("SCHEDULE= TILES=", self.log("grid-pdl"))
        self.assertTrue(os.path.exists(os.path.join(self.out, "grid-pdl.json")))
        prewarm = self.log("prewarm")
        self.assertIn("SCHEDULE=stationary", prewarm)
        self.assertIn("TILES=1-16:64x4x1,17-32:ring:32x4x2,33-8192:wg:10", prewarm)
        # auto, tiled, stationary, the four M = 32 tables, the decode one, the two teams ones,
        # the two FP8 decode ones, the two FP8 teams ones, the narrow decode one, the three
        # wide decode ones and the two decode split ones; then the FP8 teams-mid heads on the
        # default and its two tables
        self.assertEqual(prewarm.count("spark-prewarm"), 3 + 4 + 1 + 2 + 2 + 2 + 1 + 3 + 2 + 3)
        self.assertIn("TILES=1-16:32x4x1,17-8192:wg:10", prewarm)
        mid = "--weights mxfp8,fp8-block --max-m 256 -j 16 --heads 9,11,14,16,18,20,24,28 SCHEDULE= TILES="
        self.assertEqual(prewarm.count(mid), 3)
        self.assertIn(mid + "1-128:32x8x2,129-256:wg:10,257-8192:wg:5x2", prewarm)
        self.assertIn(mid + "1-128:32x8x2,129-256:wg:5x2,257-8192:wg:5x2", prewarm)
        self.assertIn("TILES=1-16:ring:32x4x3,17-32:wg:10,33-8192:wg:10", prewarm)
        self.assertIn("TILES=1-16:32x8x1,17-32:ring:32x4x2,33-8192:wg:10", prewarm)
        self.assertIn("TILES=1-16:128x4x1,17-8192:wg:10", prewarm)
        self.assertIn("TILES=1-128:32x8x2,129-1023:wg:5x2,1024-8192:wg:5x2", prewarm)
        self.assertIn("TILES=1-16:wg:10,17-8192:wg:10", prewarm)
        self.assertIn("TILES=1-16:64x4x1,17-1023:wg:10,1024-8192:wg:5x2", prewarm)
        m32 = self.log("m32")
        self.assertEqual(m32.count("rc=0"), 5)
        self.assertIn("== tiled64 1-16:64x4x1,17-8192:64x4x2", m32)
        self.assertTrue(os.path.exists(os.path.join(self.out, "m32", "sweep-wg.json")))

    def test_the_decode_and_teams_sweeps(self):
        done = self.run_steps("decode-wg", "teams")
        self.assertEqual(done.returncode, 0, done.stderr)
        decode = self.log("decode-wg")
        self.assertEqual(decode.count("rc=0"), 2)
        with open(os.path.join(self.out, "decode-wg", "sweep-wg.log")) as f:
            self.assertIn("--heads 64,128 --m 1,4,8,12,16 --weights bf16,mxfp8", f.read())
        self.assertTrue(os.path.exists(os.path.join(self.out, "decode-wg", "sweep-wg.json")))
        teams = self.log("teams")
        self.assertEqual(teams.count("rc=0"), 2)
        self.assertIn("== two 1-16:64x4x1,17-1023:wg:10,1024-8192:wg:5x2", teams)

    def test_the_fp8_decode_and_fp8_teams_sweeps(self):
        done = self.run_steps("fp8-decode", "fp8-teams")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.check_sweep("fp8-decode", 3, "ksplit8 1-16:64x8x1,17-8192:wg:10", "bn128",
                         "--pdl --heads 64,128 --m 1,4,16 --weights mxfp8,fp8-block")
        self.check_sweep("fp8-teams", 2, "one 1-128:32x8x2,129-1023:wg:10,1024-8192:wg:5x2", "two",
                         "--heads 8,16 --m 256,512,1023 --weights mxfp8,fp8-block")
        self.assertTrue(os.path.exists(os.path.join(self.out, "fp8-teams", "sweep-two.json")))

    def test_the_narrow_and_wide_decode_sweeps(self):
        done = self.run_steps("narrow-decode", "wide-decode")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.check_sweep("narrow-decode", 2, "eight 1-16:32x8x1,17-32:ring:32x4x2,33-8192:wg:10", "default",
                         "--pdl --heads 8,16 --m 1,4,16,32 --weights bf16")
        self.check_sweep("wide-decode", 4, "t64x8 1-16:64x8x1,17-32:ring:32x4x2,33-8192:wg:10", "default",
                         "--pdl --heads 16 --v-head-dim 256 --m 1,4,16,32 --weights bf16")

    def test_the_fp8_teams_mid_and_decode_split_sweeps(self):
        done = self.run_steps("fp8-teams-mid", "decode-split")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.check_sweep("fp8-teams-mid", 3, "one 1-128:32x8x2,129-256:wg:10,257-8192:wg:5x2", "two",
                         "--pdl --heads 9,11,14,16,18,20,24,28 --m 150,200,256 --weights mxfp8,fp8-block")
        self.check_sweep("decode-split", 3, "t64 1-16:64x4x1,17-8192:wg:10", "t32",
                         "--pdl --heads 16,32 --m 4,6,8,9,12,16")

    def test_an_unknown_step_is_refused_before_anything_runs(self):
        done = self.run_steps("prewarm", "grids")
        self.assertEqual(done.returncode, 2)
        self.assertIn("STEP 'grids' is not one of", done.stderr)
        self.assertFalse(os.path.exists(self.out))

    def test_list(self):
        done = subprocess.run(["bash", os.path.join(BENCH, "run-oproj.sh"), "--list"], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0)
        self.assertEqual(done.stdout.split()[:3], ["check", "prewarm", "grid-pdl"])
        self.assertEqual(done.stdout.split()[-1], "variants")

    def variant_tools(self, name, spark_us, rc=0):
        # A spark-bench writing one oproj row of the given time (then exiting with rc, as one
        # whose rows' checks failed does), and a spark-prewarm that logs.
        tools = os.path.join(self.dir.name, name)
        os.makedirs(tools, exist_ok=True)
        row = orow(128, 256, 4096, spark_us)
        bench = ("#!/bin/sh\necho \"$(basename \"$0\") $*\"\n"
                 "while [ $# -gt 0 ]; do [ \"$1\" = --json ] && echo '%s' > \"$2\"; shift; done\nexit %d\n"
                 % (json.dumps(header([row])), rc))
        for tool, text in (("spark-bench", bench), ("spark-prewarm", STAND_IN)):
            with open(os.path.join(tools, tool), "w") as f:
                f.write(text)
            os.chmod(os.path.join(tools, tool), 0o755)
        return tools

    def test_variants_against_the_build_on_the_same_rows(self):
        self.variant_tools("build/tools", 300.0)
        fast = self.variant_tools("fast", 240.0)
        env = dict(os.environ, BUILD_DIR=os.path.join(self.dir.name, "build"), VARIANTS=f"fast={fast}",
                   VARIANT_HEADS="128", VARIANT_M="16,4096,256")
        done = subprocess.run(["bash", os.path.join(BENCH, "run-oproj.sh"), self.out, "variants"],
                              capture_output=True, text=True, env=env)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("fast: oproj: 1 rows: median 0.8000", done.stdout)
        log = self.log("variants")
        self.assertLess(log.index("== base"), log.index("== fast"))
        self.assertEqual(log.count("--max-m 4096"), 2)
        with open(os.path.join(self.out, "variants", "fast.log")) as f:
            self.assertIn("--pdl --heads 128 --m 16,4096,256 --weights bf16,mxfp8", f.read())
        self.assertTrue(os.path.exists(os.path.join(self.out, "variants", "compare-fast.txt")))

    def test_a_variant_failing_its_checks_is_timed_and_a_failing_base_ends_the_step(self):
        self.variant_tools("build/tools", 300.0)
        wrong = self.variant_tools("wrong", 200.0, rc=1)
        env = dict(os.environ, BUILD_DIR=os.path.join(self.dir.name, "build"), VARIANTS=f"wrong={wrong}",
                   VARIANT_HEADS="128", VARIANT_M="4096")
        done = subprocess.run(["bash", os.path.join(BENCH, "run-oproj.sh"), self.out, "variants"],
                              capture_output=True, text=True, env=env)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertRegex(done.stdout, r"variants +rc +0 ")
        self.assertIn("wrong: spark-bench failed (its rows' checks", self.log("variants"))
        self.assertIn("wrong: oproj: 1 rows: median 0.6667", done.stdout)
        self.variant_tools("build/tools", 300.0, rc=1)
        done = subprocess.run(["bash", os.path.join(BENCH, "run-oproj.sh"), self.out + "2", "variants"],
                              capture_output=True, text=True, env=env)
        self.assertRegex(done.stdout, r"variants +rc +1 ")
        self.assertFalse(os.path.exists(os.path.join(self.out + "2", "variants", "wrong.json")))

    def test_variants_is_not_a_default_step_and_needs_its_tools(self):
        done = self.run_steps()
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertNotIn("variants", done.stdout)
        for variants, message in (("", "needs VARIANTS"), ("base=/x", "is not NAME=DIR"),
                                  (f"v={self.dir.name}", "has no spark-bench")):
            env = dict(os.environ, BUILD_DIR=os.path.join(self.dir.name, "build"), VARIANTS=variants)
            done = subprocess.run(["bash", os.path.join(BENCH, "run-oproj.sh"), self.out + "2", "variants"],
                                  capture_output=True, text=True, env=env)
            self.assertEqual(done.returncode, 2)
            self.assertIn(message, done.stderr)
            self.assertFalse(os.path.exists(self.out + "2"))


# A stand-in cmake for build-variant.sh: "--build DIR --target ..." writes DIR/tools/spark-bench
# and spark-prewarm holding the patched file's text at build time, and logs each call; it
# fails where kernel.cuh holds $CMAKE_FAILS_ON.
STAND_IN_CMAKE = """#!/usr/bin/env bash
echo "$*" >> "$CMAKE_LOG"
[ -n "${CMAKE_FAILS_ON:-}" ] && grep -q "$CMAKE_FAILS_ON" kernel.cuh && exit 1
mkdir -p "$2/tools" "$2/tests"
cat kernel.cuh > "$2/tools/spark-bench"
cat kernel.cuh > "$2/tools/spark-prewarm"
for t in "${@:4}"; do
  case $t in
    spark) cat kernel.cuh > "$2/libspark.so.0.1.0"; ln -sf libspark.so.0.1.0 "$2/libspark.so.0" ;;
    test_*) cat kernel.cuh > "$2/tests/$t" ;;
  esac
done
"""


class BuildVariant(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.repo = os.path.join(self.dir.name, "repo")
        os.makedirs(os.path.join(self.repo, "bench"))
        os.makedirs(os.path.join(self.repo, "build"))
        with open(os.path.join(BENCH, "build-variant.sh")) as src, \
                open(os.path.join(self.repo, "bench", "build-variant.sh"), "w") as dst:
            dst.write(src.read())
        with open(os.path.join(self.repo, "build", "build.ninja"), "w") as f:
            f.write("# configured\n")
        self.write("kernel.cuh", "base\n")
        self.git("init", "-q")
        self.git("add", "kernel.cuh", "bench")
        self.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
        self.patch = os.path.join(self.dir.name, "v.patch")
        with open(self.patch, "w") as f:
            f.write("--- a/kernel.cuh\n+++ b/kernel.cuh\n@@ -1 +1 @@\n-base\n+variant\n")
        tools = os.path.join(self.dir.name, "bin")
        os.makedirs(tools)
        with open(os.path.join(tools, "cmake"), "w") as f:
            f.write(STAND_IN_CMAKE)
        os.chmod(os.path.join(tools, "cmake"), 0o755)
        self.log = os.path.join(self.dir.name, "cmake.log")
        self.env = dict(os.environ, PATH=tools + os.pathsep + os.environ["PATH"], CMAKE_LOG=self.log)
        self.env.pop("BUILD_DIR", None)

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        with open(os.path.join(self.repo, name), "w") as f:
            f.write(text)

    def read(self, *parts):
        with open(os.path.join(*parts)) as f:
            return f.read()

    def git(self, *args):
        subprocess.run(["git", *args], cwd=self.repo, check=True, capture_output=True)

    def build(self, patch, out, cwd=None, **env):
        return subprocess.run(["bash", os.path.join(self.repo, "bench", "build-variant.sh"), patch, out],
                              capture_output=True, text=True, env=dict(self.env, **env), cwd=cwd)

    def test_builds_the_patched_tools_then_restores_the_tree_and_build(self):
        # PATCH and OUTDIR relative to the caller's directory, not the repository's.
        done = self.build("v.patch", "variant", cwd=self.dir.name)
        self.assertEqual(done.returncode, 0, done.stderr)
        out = os.path.join(self.dir.name, "variant")
        self.assertEqual(self.read(out, "spark-bench"), "variant\n")
        self.assertEqual(self.read(out, "spark-prewarm"), "variant\n")
        self.assertEqual(self.read(self.repo, "kernel.cuh"), "base\n")
        self.assertEqual(self.read(self.repo, "build", "tools", "spark-bench"), "base\n")
        build = os.path.join(os.path.realpath(self.repo), "build")
        self.assertEqual(self.read(self.log).count(f"--build {build} --target spark-bench spark-prewarm"), 2)

    def test_gpu_tests_come_with_the_library_they_load(self):
        out = os.path.join(self.dir.name, "variant")
        done = self.build(self.patch, out, GPU_TESTS="test_gpu_mla_oproj")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.read(out, "tests", "test_gpu_mla_oproj"), "variant\n")
        self.assertEqual(self.read(out, "libspark.so.0.1.0"), "variant\n")
        self.assertTrue(os.path.islink(os.path.join(out, "libspark.so.0")))
        # The build folder is rebuilt unpatched with the same targets.
        self.assertEqual(self.read(self.repo, "build", "tests", "test_gpu_mla_oproj"), "base\n")
        self.assertEqual(self.read(self.log).count("spark-prewarm spark test_gpu_mla_oproj"), 2)
        done = self.build(self.patch, out + "2", GPU_TESTS="test_gpu_mla_oproj rm -rf")
        self.assertEqual(done.returncode, 2)
        self.assertIn("GPU_TESTS item 'rm' is not a GPU test target", done.stderr)
        self.assertFalse(os.path.exists(out + "2"))

    def test_a_failed_build_takes_the_patch_out_again(self):
        out = os.path.join(self.dir.name, "variant")
        done = self.build(self.patch, out, CMAKE_FAILS_ON="variant")
        self.assertEqual(done.returncode, 1)
        self.assertIn("the patched build failed", done.stderr)
        self.assertEqual(self.read(self.repo, "kernel.cuh"), "base\n")
        self.assertEqual(self.read(self.repo, "build", "tools", "spark-bench"), "base\n")
        self.assertFalse(os.path.exists(out))

    def test_refuses_before_touching_anything(self):
        out = os.path.join(self.dir.name, "variant")
        cases = [("nope.patch", "is not a file")]
        self.write("kernel.cuh", "base\nedited\n")  # uncommitted: the patch no longer applies
        cases.append((self.patch, "does not apply"))
        for patch, message in cases:
            done = self.build(patch, out)
            self.assertEqual(done.returncode, 2)
            self.assertIn(message, done.stderr)
        self.write("kernel.cuh", "base\n")
        with open(os.path.join(self.repo, "other.txt"), "w") as f:
            f.write("x\n")
        self.git("add", "other.txt")
        self.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "other")
        with open(os.path.join(self.repo, "other.txt"), "w") as f:
            f.write("y\n")
        two = os.path.join(self.dir.name, "two.patch")
        with open(two, "w") as f:
            f.write("--- a/other.txt\n+++ b/other.txt\n@@ -1 +1 @@\n-y\n+z\n")
        done = self.build(two, out)
        self.assertEqual(done.returncode, 2)
        self.assertIn("uncommitted changes: other.txt", done.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertFalse(os.path.exists(self.log))


if __name__ == "__main__":
    unittest.main()

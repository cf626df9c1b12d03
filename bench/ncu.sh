#!/usr/bin/env bash
# Nsight Compute reports for spark's kernel in chosen spark-bench rows, one report per row:
#
#   bench/ncu.sh OUTDIR NAME 'SPARK-BENCH ARGS' [NAME 'ARGS']...
#
# e.g. bench/ncu.sh /tmp/ncu h128v256 '--op oproj --heads 128 --v-head-dim 256 --m 4096
# --weights bf16 --out bf16'.  The eleventh launch of the op's kernel is profiled (past the
# warm-up) with the sections that say where the time goes: speed of light, memory, compute,
# warp states, scheduler, occupancy.  BUILD_DIR (default build) holds spark-bench.
set -uo pipefail
cd "$(dirname "$0")/.."
bench=${BUILD_DIR:-build}/tools/spark-bench
out=${1:?usage: bench/ncu.sh OUTDIR NAME ARGS [NAME ARGS]...}
shift
mkdir -p "$out"
sections=(SpeedOfLight MemoryWorkloadAnalysis ComputeWorkloadAnalysis WarpStateStats SchedulerStats Occupancy
          LaunchStats)
# The tensor pipe's busy share (wgmma), where this ncu knows the metric.
gmma=sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active
metrics=()
ncu --query-metrics --chip gh100 2>/dev/null | grep -q "^${gmma%%.*} " && metrics=(--metrics "$gmma")
while [ $# -ge 2 ]; do
  name=$1 args=$2
  shift 2
  op=$(sed -n 's/.*--op \([a-z]*\).*/\1/p' <<<"$args")
  # shellcheck disable=SC2086
  ncu --kernel-name "spark_mla_${op:-qproj}" --launch-skip 10 --launch-count 1 \
    "${sections[@]/#/--section=}" "${metrics[@]}" \
    "$bench" $args --replays 1 --warmup 1 --json "$out/$name.json" >"$out/$name.txt" 2>&1
  printf '%-16s rc %s  %s\n' "$name" "$?" "$(grep -m1 -E 'Duration' "$out/$name.txt" | tr -s ' ')"
done

#!/usr/bin/env bash
# The value up-projection's measurements still owed (bench/NOTES.md, Next), in the order they
# are needed, so that a GPU session with little time runs the most needed first:
#
#   bench/run-oproj.sh OUTDIR [STEP...]        STEP: one of --list (default: all, in order)
#
# Each step writes its JSON and logs under OUTDIR and prints one line; STEP_HOOK, if set, is
# run (by bash) after each step, e.g. to pack OUTDIR somewhere that survives a timeout.
# spark-bench writes its JSON row by row, so a step cut short keeps the rows it finished.
# BUILD_DIR (default build) holds spark-bench and spark-prewarm; SPARK_CACHE_DIR as usual.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
bench="$build/tools/spark-bench"
prewarm="$build/tools/spark-prewarm"

# Candidate decode tables for the sweep (M 1-32): the built-in one, rings (through M = 32, the
# 128-thread ones; the 256-thread ones to 16, where 32x4x3 takes over), and register-light tiles.
past=33-8192:wg:10
decode_tables="default=
ring32x4x3=1-32:ring:32x4x3,$past
ring32x4x2=1-32:ring:32x4x2,$past
ring32x8x3=1-16:ring:32x8x3,17-32:ring:32x4x3,$past
ring32x8x2=1-16:ring:32x8x2,17-32:ring:32x4x3,$past
t32x16x1=1-16:32x16x1,17-8192:wg:10
t64x8x1=1-16:64x8x1,17-8192:wg:10"
large_m=1,4,16,32,64,256,1024,4096,8192

steps=(check prewarm stationary-128 tiled-128 decode-sweep stationary-8-16 stationary-128-nopdl
       decode-sweep-nopdl stationary-32-64)
if [ "${1:-}" = --list ]; then
  printf '%s\n' "${steps[@]}"
  exit 0
fi
out=${1:?usage: bench/run-oproj.sh OUTDIR [STEP...]}
shift
if [ $# -gt 0 ]; then
  for want in "$@"; do
    [[ " ${steps[*]} " == *" $want "* ]] || { echo "run-oproj: STEP '$want' is not one of: ${steps[*]}" >&2; exit 2; }
  done
  steps=("$@")
fi
mkdir -p "$out"

run_step() {
  case $1 in
    check)  # the ring tiles' accuracy suite and a few checked rows of spark-bench
      LOG_DIR="$out/gpu-check" BUILD_DIR="$build" scripts/gpu-check.sh oproj-ring oproj-stationary bench-oproj ;;
    prewarm)  # every kernel the later steps use, compiled in parallel rather than at plan creation
      local args=(--arch sm_90a --nope 128 --v-head-dim 128,256 --weights bf16,mxfp8,fp8-block -j 16)
      "$prewarm" "${args[@]}" --heads 8,16,32,64,128 || return 1
      SPARK_OPROJ_SCHEDULE=stationary "$prewarm" "${args[@]}" --heads 8,16,32,64,128 || return 1
      local line
      while IFS= read -r line; do
        [ "${line%%=*}" = default ] || SPARK_OPROJ_TILES=${line#*=} "$prewarm" "${args[@]}" --heads 8,16,128 ||
          return 1
      done <<<"$decode_tables" ;;
    stationary-128)  # the schedule past decode at 128 heads, PDL on
      SPARK_OPROJ_SCHEDULE=stationary "$bench" --op oproj --pdl --heads 128 --m $large_m \
        --json "$out/stationary-h128-pdl.json" ;;
    tiled-128)  # the default schedule on a few of the same rows, for the comparison
      "$bench" --op oproj --pdl --heads 128 --v-head-dim 128 --weights bf16 --m 64,256,4096 \
        --json "$out/tiled-h128-pdl.json" ;;
    decode-sweep)  # decode tiles and rings, PDL on
      mkdir -p "$out/decode-pdl" &&
        SWEEP_VAR=SPARK_OPROJ_TILES SWEEP_TABLES=$decode_tables bench/sweep.sh "$bench" "$out/decode-pdl" \
          --op oproj --pdl --heads 8,16,128 --v-head-dim 128 --m 1,4,16,32 ;;
    stationary-8-16)
      SPARK_OPROJ_SCHEDULE=stationary "$bench" --op oproj --pdl --heads 8,16 --m $large_m \
        --json "$out/stationary-h8-16-pdl.json" ;;
    stationary-128-nopdl)
      SPARK_OPROJ_SCHEDULE=stationary "$bench" --op oproj --heads 128 --m $large_m \
        --json "$out/stationary-h128.json" ;;
    decode-sweep-nopdl)
      mkdir -p "$out/decode" &&
        SWEEP_VAR=SPARK_OPROJ_TILES SWEEP_TABLES=$decode_tables bench/sweep.sh "$bench" "$out/decode" \
          --op oproj --heads 8,16,128 --v-head-dim 128 --m 1,4,16,32 ;;
    stationary-32-64)
      SPARK_OPROJ_SCHEDULE=stationary "$bench" --op oproj --pdl --heads 32,64 --m $large_m \
        --json "$out/stationary-h32-64-pdl.json" ;;
  esac
}

for step in "${steps[@]}"; do
  start=$SECONDS
  run_step "$step" >"$out/$step.log" 2>&1
  rc=$?
  printf '%-22s rc %3s %5ss  %s\n' "$step" "$rc" "$((SECONDS - start))" "$(grep -v '^ *$' "$out/$step.log" | tail -1)"
  [ -n "${STEP_HOOK:-}" ] && bash -c "$STEP_HOOK"
done
exit 0

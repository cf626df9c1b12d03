#!/usr/bin/env bash
# The value up-projection's grid and the comparisons behind its auto schedule (bench/NOTES.md
# v21), in the order they are needed, so that a GPU session with little time runs the most
# needed first:
#
#   bench/run-oproj.sh OUTDIR [STEP...]        STEP: one of --list (default: all, in order)
#
# Each step writes its JSON and logs under OUTDIR and prints one line; STEP_HOOK, if set, is
# run (by bash) after each step, e.g. to pack OUTDIR somewhere that survives a timeout.
# spark-bench writes its JSON row by row, so a step cut short keeps the rows it finished.
# BUILD_DIR (default build) holds spark-bench and spark-prewarm; SPARK_CACHE_DIR as usual.
# The step `variants` (only when named) times prepared kernel variants against BUILD_DIR's
# tools on the same rows: VARIANTS="NAME=DIR ..." (each DIR from bench/build-variant.sh),
# rows from VARIANT_HEADS, VARIANT_M and VARIANT_WEIGHTS (defaults below), each side
# prewarmed by its own spark-prewarm; bench/compare.py's report per variant.  A variant whose
# rows fail their checks (a diagnostic that skips work) is still compared when its JSON was
# written; the unpatched tools failing ends the step.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
build=${BUILD_DIR:-build}
bench="$build/tools/spark-bench"
prewarm="$build/tools/spark-prewarm"

# The schedules compared at M = 32 (bench/NOTES.md v21): the auto choice, the ring alone, the
# stationary kernel alone, and the two tiled tiles (the built-in tiled tile is 32x8x2 or
# 64x4x2 by heads).  Decode (1-16) takes one tile for all heads here; only M = 32 is timed.
m32_tables="default=
ring=1-16:64x4x1,17-32:ring:32x4x2,33-8192:wg:10
wg=1-16:64x4x1,17-8192:wg:10
tiled32=1-16:64x4x1,17-8192:32x8x2
tiled64=1-16:64x4x1,17-8192:64x4x2"
# Decode at 64-128 heads (bench/NOTES.md v24): the built-in choice (the stationary kernel for
# bf16 weights and output, the tiled tile otherwise) against the stationary kernel for all.
decode_tables="default=
wg=1-16:wg:10,17-8192:wg:10"
# Past M = 1023: one warp group against two teams (the built-in choice, v24).
teams_tables="one=1-16:64x4x1,17-1023:wg:10,1024-8192:wg:10
two=1-16:64x4x1,17-1023:wg:10,1024-8192:wg:5x2"
# FP8 decode at 64-128 heads (bench/NOTES.md v27): the built-in 64-column tile against half
# the CTAs (128 columns) and twice the warps along L.
fp8_decode_tables="default=
bn128=1-16:128x4x1,17-8192:wg:10
ksplit8=1-16:64x8x1,17-8192:wg:10"
# FP8 past M = 128 at 8-16 heads (bench/NOTES.md v27): one warp group against two teams, which
# split the weight slice's dequantisation.
fp8_teams_tables="one=1-128:32x8x2,129-1023:wg:10,1024-8192:wg:5x2
two=1-128:32x8x2,129-1023:wg:5x2,1024-8192:wg:5x2"
# Decode at 8-16 heads with bf16 weights (bench/NOTES.md v29): the built-in narrow tile (L split
# four ways) against eight ways, the tile before v29.
narrow_decode_tables="default=
eight=1-16:32x8x1,17-32:ring:32x4x2,33-8192:wg:10"
# The two decode rows still above half the staged time (H = 16, V = 256, M = 16 and 32, bf16
# out; bench/NOTES.md v29): the built-in choice (64x4x1, the 32x4x2 ring past 16) against a
# narrower and a deeper decode tile and against the 32x4x3 ring at decode with the stationary
# kernel past 16.
wide_decode_tables="default=
t32x4=1-16:32x4x1,17-32:ring:32x4x2,33-8192:wg:10
t64x8=1-16:64x8x1,17-32:ring:32x4x2,33-8192:wg:10
ring3=1-16:ring:32x4x3,17-32:wg:10,33-8192:wg:10"
# FP8 at M 129-256 (bench/NOTES.md v37): the built-in choice (two teams from 20 blocks, one
# team from 9, tiled below) against one team and two teams for every key.
fp8_teams_mid_tables="default=
one=1-128:32x8x2,129-256:wg:10,257-8192:wg:5x2
two=1-128:32x8x2,129-256:wg:5x2,257-8192:wg:5x2"
mid_heads=9,11,14,16,18,20,24,28  # 9-28 blocks at V = 128, 18-56 at V = 256 (11: GLM-5 at TP 6, 22 blocks)
# Decode split at M = 8 (bench/NOTES.md v37): the built-in choice (32-column CTAs at M 9-16
# for keys of 32 blocks) against 64-column CTAs at all of decode (those keys before v37) and
# 32-column CTAs at all of decode.
decode_split_tables="default=
t64=1-16:64x4x1,17-8192:wg:10
t32=1-16:32x4x1,17-8192:wg:10"
grid_m=1,4,16,32,64,256,1024,4096,8192
heads=8,16,32,64,128

# Every step, in order; all but the last run when none is named.
known=(check prewarm grid-pdl m32 past-tiled past-stationary grid decode-wg teams fp8-decode fp8-teams narrow-decode
  wide-decode fp8-teams-mid decode-split variants)
steps=("${known[@]:0:${#known[@]}-1}")
if [ "${1:-}" = --list ]; then
  printf '%s\n' "${known[@]}"
  exit 0
fi
out=${1:?usage: bench/run-oproj.sh OUTDIR [STEP...]}
shift
if [ $# -gt 0 ]; then
  for want in "$@"; do
    [[ " ${known[*]} " == *" $want "* ]] || { echo "run-oproj: STEP '$want' is not one of: ${known[*]}" >&2; exit 2; }
  done
  steps=("$@")
fi
if [[ " ${steps[*]} " == *" variants "* ]]; then
  [ -n "${VARIANTS:-}" ] || { echo "run-oproj: the step 'variants' needs VARIANTS=\"NAME=DIR ...\"" >&2; exit 2; }
  for entry in $VARIANTS; do
    name=${entry%%=*} dir=${entry#*=}
    [[ $entry == *=* && $name =~ ^[A-Za-z0-9_.-]+$ && $name != base ]] ||
      { echo "run-oproj: VARIANTS item '$entry' is not NAME=DIR (NAME of letters, digits, . _ -; not 'base')" >&2; exit 2; }
    if [ ! -x "$dir/spark-bench" ] || [ ! -x "$dir/spark-prewarm" ]; then
      echo "run-oproj: VARIANTS item '$entry': $dir has no spark-bench and spark-prewarm" >&2
      exit 2
    fi
  done
fi
mkdir -p "$out"

run_step() {
  case $1 in
    check)  # the op's GPU suite on the default (auto) and tiled schedules, checked bench rows
      LOG_DIR="$out/gpu-check" BUILD_DIR="$build" scripts/gpu-check.sh oproj oproj-tiled bench-oproj ;;
    prewarm)  # every kernel the later steps use, compiled in parallel rather than at plan creation
      # shellcheck disable=SC2054 # the commas are the tools' list syntax
      local args=(--arch sm_90a --nope 128 --v-head-dim 128,256 --weights bf16,mxfp8,fp8-block -j 16 --heads "$heads")
      "$prewarm" "${args[@]}" || return 1
      local schedule line
      for schedule in tiled stationary; do SPARK_OPROJ_SCHEDULE=$schedule "$prewarm" "${args[@]}" || return 1; done
      while IFS= read -r line; do
        [ "${line%%=*}" = default ] || SPARK_OPROJ_TILES=${line#*=} "$prewarm" "${args[@]}" || return 1
      done <<<"$m32_tables"$'\n'"$decode_tables"$'\n'"$teams_tables"$'\n'"$fp8_decode_tables"$'\n'"$fp8_teams_tables"$'\n'"$narrow_decode_tables"$'\n'"$wide_decode_tables"$'\n'"$decode_split_tables"
      # fp8-teams-mid times heads of its own, FP8 weights only, M up to 256.
      args=(--arch sm_90a --nope 128 --v-head-dim 128,256 --weights mxfp8,fp8-block --max-m 256 -j 16 --heads "$mid_heads")
      while IFS= read -r line; do
        SPARK_OPROJ_TILES=${line#*=} "$prewarm" "${args[@]}" || return 1
      done <<<"$fp8_teams_mid_tables" ;;
    grid-pdl)  # the op's grid on the default schedule, PDL on
      "$bench" --op oproj --pdl --heads $heads --m $grid_m --json "$out/grid-pdl.json" ;;
    m32)  # M = 32: auto against each schedule alone, PDL on
      mkdir -p "$out/m32" &&
        SWEEP_VAR=SPARK_OPROJ_TILES SWEEP_TABLES=$m32_tables bench/sweep.sh "$bench" "$out/m32" \
          --op oproj --pdl --heads $heads --m 32 ;;
    past-tiled)  # past decode at up to 64 heads, each schedule alone, PDL on
      SPARK_OPROJ_SCHEDULE=tiled "$bench" --op oproj --pdl --heads 8,16,32,64 --m 64,256,1024 \
        --json "$out/past-tiled-pdl.json" ;;
    past-stationary)
      SPARK_OPROJ_SCHEDULE=stationary "$bench" --op oproj --pdl --heads 8,16,32,64 --m 64,256,1024 \
        --json "$out/past-stationary-pdl.json" ;;
    grid)  # the grid with PDL off
      "$bench" --op oproj --heads $heads --m $grid_m --json "$out/grid.json" ;;
    decode-wg)  # decode at 64-128 heads: tiled against stationary, PDL on
      mkdir -p "$out/decode-wg" &&
        SWEEP_VAR=SPARK_OPROJ_TILES SWEEP_TABLES=$decode_tables bench/sweep.sh "$bench" "$out/decode-wg" \
          --op oproj --pdl --heads 64,128 --m 1,4,8,12,16 --weights bf16,mxfp8 ;;
    teams)  # M >= 1024: one warp group against two teams, PDL on
      mkdir -p "$out/teams" &&
        SWEEP_VAR=SPARK_OPROJ_TILES SWEEP_TABLES=$teams_tables bench/sweep.sh "$bench" "$out/teams" \
          --op oproj --pdl --heads 8,16,32,128 --m 1024,4096 --weights bf16,mxfp8 ;;
    fp8-decode)  # FP8 decode at 64-128 heads: the decode tile's width and split, PDL on
      mkdir -p "$out/fp8-decode" &&
        SWEEP_VAR=SPARK_OPROJ_TILES SWEEP_TABLES=$fp8_decode_tables bench/sweep.sh "$bench" "$out/fp8-decode" \
          --op oproj --pdl --heads 64,128 --m 1,4,16 --weights mxfp8,fp8-block ;;
    fp8-teams)  # FP8 past M = 128 at 8-16 heads: one warp group against two teams, PDL on
      mkdir -p "$out/fp8-teams" &&
        SWEEP_VAR=SPARK_OPROJ_TILES SWEEP_TABLES=$fp8_teams_tables bench/sweep.sh "$bench" "$out/fp8-teams" \
          --op oproj --pdl --heads 8,16 --m 256,512,1023 --weights mxfp8,fp8-block ;;
    narrow-decode)  # decode at 8-16 heads, bf16 weights: the narrow tile's L split, four ways against eight, PDL on
      mkdir -p "$out/narrow-decode" &&
        SWEEP_VAR=SPARK_OPROJ_TILES SWEEP_TABLES=$narrow_decode_tables bench/sweep.sh "$bench" "$out/narrow-decode" \
          --op oproj --pdl --heads 8,16 --m 1,4,16,32 --weights bf16 ;;
    wide-decode)  # decode at 16 heads, V = 256, bf16 weights: the tiles and rings that might take M = 16-32 below half the staged time, PDL on
      mkdir -p "$out/wide-decode" &&
        SWEEP_VAR=SPARK_OPROJ_TILES SWEEP_TABLES=$wide_decode_tables bench/sweep.sh "$bench" "$out/wide-decode" \
          --op oproj --pdl --heads 16 --v-head-dim 256 --m 1,4,16,32 --weights bf16 ;;
    fp8-teams-mid)  # FP8 at M 129-256 around 20 blocks: the built-in choice against one team and two teams, PDL on
      mkdir -p "$out/fp8-teams-mid" &&
        SWEEP_VAR=SPARK_OPROJ_TILES SWEEP_TABLES=$fp8_teams_mid_tables bench/sweep.sh "$bench" "$out/fp8-teams-mid" \
          --op oproj --pdl --heads "$mid_heads" --m 150,200,256 --weights mxfp8,fp8-block ;;
    decode-split)  # decode at 16-32 heads: 32- against 64-column CTAs by M, PDL on
      mkdir -p "$out/decode-split" &&
        SWEEP_VAR=SPARK_OPROJ_TILES SWEEP_TABLES=$decode_split_tables bench/sweep.sh "$bench" "$out/decode-split" \
          --op oproj --pdl --heads 16,32 --m 4,6,8,9,12,16 ;;
    variants)  # each prepared variant against this build's tools, same rows, PDL on
      local vh=${VARIANT_HEADS:-8,16,32,128} vm=${VARIANT_M:-1,16,256,1024,4096} vw=${VARIANT_WEIGHTS:-bf16,mxfp8}
      local max_m entry name dir
      max_m=$(tr ',' '\n' <<<"$vm" | sort -n | tail -1)
      mkdir -p "$out/variants"
      for entry in "base=$(dirname "$bench")" $VARIANTS; do
        name=${entry%%=*} dir=${entry#*=}
        echo "== $name $dir"
        "$dir/spark-prewarm" --arch sm_90a --nope 128 --v-head-dim 128,256 --weights "$vw" --heads "$vh" \
          --max-m "$max_m" -j 16 -q || return 1
        if ! "$dir/spark-bench" --op oproj --pdl --heads "$vh" --m "$vm" --weights "$vw" \
          --json "$out/variants/$name.json" >"$out/variants/$name.log" 2>&1; then
          # Only a variant may fail its rows' checks (see the top of this file).
          [ "$name" != base ] && [ -s "$out/variants/$name.json" ] || return 1
          echo "$name: spark-bench failed (its rows' checks, see variants/$name.log); timed all the same"
        fi
      done
      for entry in $VARIANTS; do
        name=${entry%%=*}
        python3 bench/compare.py "$out/variants/base.json" "$out/variants/$name.json" >"$out/variants/compare-$name.txt" ||
          return 1
        echo "$name: $(grep -E '^oproj: ' "$out/variants/compare-$name.txt")"
      done ;;
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

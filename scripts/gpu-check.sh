#!/usr/bin/env bash
# Every GPU test, on the GPU machine, from one build folder (BUILD_DIR, default build; a folder
# packed by scripts/device-bundle.sh works the same):
#
#   scripts/gpu-check.sh [SUITE...]      SUITE: a name of the list printed by --list (default: all)
#
# The query projection's suites (bf16, MXFP8 and block-FP8 weights), the value up-projection's
# on its default (auto) schedule, again with SPARK_OPROJ_SCHEDULE=tiled and =stationary, and with ring tiles at
# decode (SPARK_OPROJ_TILES=tests/gpu/oproj_ring_tiles.txt, as test_gpu_mla_oproj_ring), with the stationary kernel
# everywhere (tests/gpu/oproj_wg_tiles.txt, as test_gpu_mla_oproj_wg) and with pre-converted tiles at decode
# (tests/gpu/oproj_pre_tiles.txt, as test_gpu_mla_oproj_pre), the cache statistics
# test, the Python package's GPU tests (the torch ops, loading BUILD_DIR's libspark.so
# through SPARK_LIBRARY; they need torch and pytest), and a few rows of spark-bench per op
# (its output check against the staged path, and that it runs at all before a grid).  Each suite's output goes to LOG_DIR
# (default BUILD_DIR/gpu-check/), one line per suite here.  A suite that skips counts as
# failed: this script is run where there is a GPU, so a skip means it was not found.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
logs=${LOG_DIR:-$build/gpu-check}
py=${PYTHON:-python3}

ring_tiles=$(<tests/gpu/oproj_ring_tiles.txt)
pre_tiles=$(<tests/gpu/oproj_pre_tiles.txt)
wg_tiles=$(<tests/gpu/oproj_wg_tiles.txt)
# name | test binary (or "pytest", "spark-bench") | environment (VAR=value, - for none)
suites=(
  "qproj|test_gpu_mla_qproj|-"
  "qproj-mxfp8|test_gpu_mla_qproj_mxfp8|-"
  "qproj-fp8-block|test_gpu_mla_qproj_fp8_block|-"
  "oproj|test_gpu_mla_oproj|-"
  "oproj-tiled|test_gpu_mla_oproj|SPARK_OPROJ_SCHEDULE=tiled"
  "oproj-stationary|test_gpu_mla_oproj|SPARK_OPROJ_SCHEDULE=stationary"
  "oproj-ring|test_gpu_mla_oproj|SPARK_OPROJ_TILES=$ring_tiles"
  "oproj-wg|test_gpu_mla_oproj|SPARK_OPROJ_TILES=$wg_tiles"
  "oproj-pre|test_gpu_mla_oproj|SPARK_OPROJ_TILES=$pre_tiles"
  "cache-stats|test_gpu_cache_stats|-"
  "python|pytest|-"
  "bench-qproj|spark-bench|-"
  "bench-oproj|spark-bench|-"
)

if [ "${1:-}" = --list ]; then
  for entry in "${suites[@]}"; do echo "${entry%%|*}"; done
  exit 0
fi
for want in "$@"; do
  found=0
  for entry in "${suites[@]}"; do [ "${entry%%|*}" = "$want" ] && found=1; done
  [ $found = 1 ] || { echo "gpu-check: SUITE '$want' is not one of: $("$0" --list | tr '\n' ' ')" >&2; exit 2; }
done
mkdir -p "$logs"
library=$(cd "$build" && pwd)/libspark.so.0

failed=0
printf '%-18s %5s %7s  %s\n' suite exit seconds summary
for entry in "${suites[@]}"; do
  IFS='|' read -r name binary environment <<<"$entry"
  if [ $# -gt 0 ]; then
    selected=0
    for want in "$@"; do [ "$want" = "$name" ] && selected=1; done
    [ $selected = 1 ] || continue
  fi
  env_args=(env SPARK_LOG_LEVEL=warn)
  [ "$environment" != - ] && env_args+=("$environment")
  log="$logs/$name.log"
  start=$SECONDS
  if [ "$binary" = pytest ]; then
    "${env_args[@]}" "SPARK_LIBRARY=$library" "PYTHONPATH=$PWD/python" \
      "$py" -m pytest -q -ra -p no:cacheprovider tests/python/test_ops_gpu.py tests/python/test_oproj_gpu.py \
      >"$log" 2>&1
    rc=$?
    summary=$(grep -E '^[=]* *[0-9]+ (passed|failed|skipped)|^[=]* *(no tests ran|[0-9]+ error)' "$log" | tail -1 | tr -d '=')
    if [ $rc -eq 0 ] && grep -Eq 'skipped|no tests ran' <<<"$summary"; then rc=77; fi
  elif [ "$binary" = spark-bench ]; then
    # Two shapes, decode and past it, every weight format and output, few replays: the rows'
    # checks (bits against the staged path, pad and next-token rows untouched) fail the suite.
    "${env_args[@]}" "$build/tools/spark-bench" --op "${name#bench-}" --heads 16 --m 1,64 --layers 4 --replays 3 \
      --json "$logs/$name.json" >"$log" 2>&1
    rc=$?
    summary=$(grep -E '^wrote |^spark-bench: ' "$log" | tail -1)
  else
    "${env_args[@]}" "$build/tests/$binary" >"$log" 2>&1
    rc=$?
    summary=$(grep -E '^\[doctest\] test cases:|SKIPPED' "$log" | tail -1)
  fi
  printf '%-18s %5s %7s  %s\n' "$name" "$rc" "$((SECONDS - start))" "${summary:-no summary (see $log)}"
  [ "$rc" -eq 0 ] || failed=1
done
exit $failed

#!/usr/bin/env bash
# compute-sanitizer over the GPU suites, checking spark's kernels (GPU machine only):
#
#   scripts/gpu-sanitize.sh [TOOL...]      TOOL: memcheck racecheck synccheck initcheck (default: all)
#
# Each tool runs the suites whole (the query projection's bf16 and MXFP8 suites, the value
# up-projection's on its default (auto) schedule, again with SPARK_OPROJ_SCHEDULE=tiled and =stationary and with
# the ring tiles at decode, SPARK_OPROJ_TILES=tests/gpu/oproj_ring_tiles.txt, with the stationary kernel
# everywhere, tests/gpu/oproj_wg_tiles.txt, and with pre-converted tiles at decode,
# tests/gpu/oproj_pre_tiles.txt), or
# with CASES=subset a part of them that still reaches every kernel family (per-tile decode
# tiles with and without K chunks, flat copies, the weight-stationary mma.sync and wgmma
# kernels, the ring and pre-converted tiles under their tables; bf16 and FP8 weights; bf16
# and e4m3 output; pitched views, graphs, PDL) at every M of the suites.  memcheck, synccheck
# and initcheck instrument only spark's kernels (spark_mla_qproj, spark_mla_oproj; cuBLAS's
# reference kernels run as they are;
# the harness writes every buffer it reads back, so initcheck has nothing to say about
# them).  racecheck cannot take that filter (compute-sanitizer 2025.3 stops with "Internal
# Sanitizer Error: The Sanitizer failed to handle a hardware exception" on the first
# filtered launch), so it checks every kernel and only hazards in spark's kernels count:
# cuBLAS's own (nvjet) kernels report shared-memory hazards that are not spark's.
# Logs go to LOG_DIR (default build/gpu-sanitize/); the binaries come from BUILD_DIR (default
# build).  Exits non-zero when a tool reports an error or a test fails under it.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
logs=${LOG_DIR:-$build/gpu-sanitize}
sanitizer=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(memcheck racecheck synccheck initcheck)
mkdir -p "$logs"

subset_bf16='*H=8 K=192*,*H=64 K=128*,*H=128 K=192*,CUDA graph*,PDL plan*'
subset_mxfp8='*weights: H=8 K=128*,*weights: H=32 K=128*,*weights: H=128 K=192*,*NaN scale*,*padded pitches*'
subset_oproj='*H=8 V=256*,*H=128 V=128*,*effective weights bitwise*H=8 V=256*,CUDA graph*fp8-block*,PDL plan*'
ring_tiles=$(<tests/gpu/oproj_ring_tiles.txt)
pre_tiles=$(<tests/gpu/oproj_pre_tiles.txt)
wg_tiles=$(<tests/gpu/oproj_wg_tiles.txt)
# suite binary | log name | environment (VAR=value, - for none) | spark's kernel name | CASES=subset filter
suites=(
  "test_gpu_mla_qproj|test_gpu_mla_qproj|-|spark_mla_qproj|$subset_bf16"
  "test_gpu_mla_qproj_mxfp8|test_gpu_mla_qproj_mxfp8|-|spark_mla_qproj|$subset_mxfp8"
  "test_gpu_mla_oproj|test_gpu_mla_oproj|-|spark_mla_oproj|$subset_oproj"
  "test_gpu_mla_oproj|test_gpu_mla_oproj-tiled|SPARK_OPROJ_SCHEDULE=tiled|spark_mla_oproj|$subset_oproj"
  "test_gpu_mla_oproj|test_gpu_mla_oproj-stationary|SPARK_OPROJ_SCHEDULE=stationary|spark_mla_oproj|$subset_oproj"
  "test_gpu_mla_oproj|test_gpu_mla_oproj-ring|SPARK_OPROJ_TILES=$ring_tiles|spark_mla_oproj|$subset_oproj"
  "test_gpu_mla_oproj|test_gpu_mla_oproj-wg|SPARK_OPROJ_TILES=$wg_tiles|spark_mla_oproj|$subset_oproj"
  "test_gpu_mla_oproj|test_gpu_mla_oproj-pre|SPARK_OPROJ_TILES=$pre_tiles|spark_mla_oproj|$subset_oproj"
)

failed=0
printf '%-10s %-38s %6s %s\n' tool suite exit summary
for tool in "${tools[@]}"; do
  for entry in "${suites[@]}"; do
    IFS='|' read -r suite name environment kernel cases <<<"$entry"
    [ "${CASES:-all}" = all ] && cases='*'
    extra=(--kernel-name "kns=$kernel" --error-exitcode 86)
    [ "$tool" = racecheck ] && extra=()
    env_args=()
    [ "$environment" != - ] && env_args=(env "$environment")
    log="$logs/$tool-$name.log"
    "${env_args[@]}" "$sanitizer" --tool "$tool" --print-limit 1000 "${extra[@]}" "$build/tests/$suite" -tc="$cases" \
      >"$log" 2>&1
    rc=$?
    summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1 | sed 's/^=* *//')
    if [ "$tool" = racecheck ]; then
      # A hazard report names both accesses' kernels: count those that involve spark's.
      ours=$(grep -E '(Race reported between|and) (Read|Write) access at' "$log" | grep -c "$kernel" || true)
      others=$(grep -c 'Race reported between' "$log" || true)
      summary="$summary; in spark's kernels: $ours"
      rc=1
      [ "$ours" -eq 0 ] && grep -q 'test cases:.* 0 failed' "$log" && ! grep -q 'Internal Sanitizer Error' "$log" && rc=0
      [ "$others" -gt 0 ] && summary="$summary (the rest in cuBLAS's kernels)"
    fi
    printf '%-10s %-38s %6s %s\n' "$tool" "$name" "$rc" "${summary:-no summary (see $log)}"
    [ "$rc" -eq 0 ] || failed=1
  done
done
exit $failed

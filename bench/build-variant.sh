#!/usr/bin/env bash
# Builds spark-bench and spark-prewarm with a patch applied, for timing a kernel change against
# the unpatched tree in one GPU session:
#
#   bench/build-variant.sh PATCH OUTDIR
#
# The patch is applied to the working tree, the two tools are rebuilt in BUILD_DIR (default
# build; the templates are compiled into the tools, so only they are rebuilt), copied to
# OUTDIR/spark-bench and OUTDIR/spark-prewarm, and the patch is taken out again however the
# script ends (a failed build, an interrupt); BUILD_DIR's tools are then rebuilt as they
# were.  PATCH and OUTDIR are taken from the current directory, BUILD_DIR (as in the other
# scripts) from the repository's root.  The files the patch touches must have no uncommitted
# changes.  Each variant's kernels have sources of their own, so its cache entries never mix
# with the unpatched tools' (prewarm each with its own spark-prewarm).  GPU_TESTS="TARGET ..."
# (GPU test binaries, e.g. test_gpu_mla_oproj) also builds libspark.so and those tests with
# the patch and copies them to OUTDIR/libspark.so* and OUTDIR/tests/, where each finds
# OUTDIR's library (RPATH $ORIGIN/..), so the variant's kernels can be checked as well as timed.
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: bench/build-variant.sh PATCH OUTDIR" >&2
  exit 2
fi
[ -f "$1" ] || { echo "build-variant: PATCH '$1' is not a file" >&2; exit 2; }
patch=$(realpath "$1")
out=$(realpath -m "$2")
cd "$(dirname "$0")/.." || exit 2
build=$(realpath -m "${BUILD_DIR:-build}")
[ -f "$build/build.ninja" ] || [ -f "$build/Makefile" ] ||
  { echo "build-variant: BUILD_DIR '$build' is not a configured build folder" >&2; exit 2; }
git apply --check "$patch" 2>/dev/null ||
  { echo "build-variant: PATCH '$patch' does not apply to the working tree" >&2; exit 2; }
mapfile -t touched < <(git apply --numstat "$patch" | cut -f3)
[ ${#touched[@]} -gt 0 ] || { echo "build-variant: PATCH '$patch' changes no file's text" >&2; exit 2; }
if ! git diff --quiet HEAD -- "${touched[@]}"; then
  echo "build-variant: the files PATCH touches have uncommitted changes: ${touched[*]}" >&2
  exit 2
fi

read -r -a gpu_tests <<<"${GPU_TESTS:-}"
for t in "${gpu_tests[@]}"; do
  [[ $t =~ ^test_gpu_[A-Za-z0-9_]+$ ]] ||
    { echo "build-variant: GPU_TESTS item '$t' is not a GPU test target (test_gpu_...)" >&2; exit 2; }
done
tools=(--target spark-bench spark-prewarm)
[ ${#gpu_tests[@]} -gt 0 ] && tools+=(spark "${gpu_tests[@]}")
restore() {
  if ! git apply -R "$patch"; then
    echo "build-variant: could not take PATCH out of the working tree again; see git diff" >&2
    exit 1
  fi
  cmake --build "$build" "${tools[@]}" >/dev/null ||
    { echo "build-variant: rebuilding BUILD_DIR's unpatched tools failed" >&2; exit 1; }
}
git apply "$patch" || exit 1
trap 'restore' EXIT
trap 'exit 130' INT TERM
cmake --build "$build" "${tools[@]}" || { echo "build-variant: the patched build failed" >&2; exit 1; }
mkdir -p "$out" && cp "$build/tools/spark-bench" "$build/tools/spark-prewarm" "$out/" || exit 1
if [ ${#gpu_tests[@]} -gt 0 ]; then
  mkdir -p "$out/tests" && cp -P "$build"/libspark.so* "$out/" || exit 1
  for t in "${gpu_tests[@]}"; do cp "$build/tests/$t" "$out/tests/" || exit 1; done
  echo "build-variant: $out/libspark.so, $out/tests/{${GPU_TESTS// /,}}"
fi
echo "build-variant: $out/spark-bench, $out/spark-prewarm"

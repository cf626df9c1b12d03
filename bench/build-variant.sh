#!/usr/bin/env bash
# Builds spark-bench and spark-prewarm with a patch applied, for timing a kernel change against
# the unpatched tree in one GPU session:
#
#   bench/build-variant.sh PATCH OUTDIR
#
# The patch is applied to the working tree, the two tools are rebuilt in BUILD_DIR (default
# build; the templates are compiled into the tools, so only they are rebuilt), copied to
# OUTDIR/spark-bench and OUTDIR/spark-prewarm, and the patch is taken out again, whether the
# build worked or not; BUILD_DIR is then rebuilt as it was.  The files the patch touches must
# have no uncommitted changes.  Each variant's kernels have sources of their own, so its cache
# entries never mix with the unpatched tools' (prewarm each with its own spark-prewarm).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
if [ $# -ne 2 ]; then
  echo "usage: bench/build-variant.sh PATCH OUTDIR" >&2
  exit 2
fi
patch=$1 out=$2
build=${BUILD_DIR:-build}
[ -f "$patch" ] || { echo "build-variant: PATCH '$patch' is not a file" >&2; exit 2; }
[ -f "$build/build.ninja" ] || [ -f "$build/Makefile" ] ||
  { echo "build-variant: BUILD_DIR '$build' is not a configured build folder" >&2; exit 2; }
git apply --check "$patch" 2>/dev/null ||
  { echo "build-variant: PATCH '$patch' does not apply to the working tree" >&2; exit 2; }
touched=$(git apply --numstat "$patch" | cut -f3)
# shellcheck disable=SC2086 # one path per line, none with spaces (git apply --check passed)
if ! git diff --quiet HEAD -- $touched; then
  echo "build-variant: the files PATCH touches have uncommitted changes: ${touched//$'\n'/ }" >&2
  exit 2
fi

git apply "$patch" || exit 1
rc=0
cmake --build "$build" --target spark-bench spark-prewarm || rc=1
if [ $rc -eq 0 ]; then
  mkdir -p "$out" && cp "$build/tools/spark-bench" "$build/tools/spark-prewarm" "$out/" || rc=1
fi
git apply -R "$patch" || { echo "build-variant: could not take PATCH out again; see git diff" >&2; exit 1; }
cmake --build "$build" --target spark-bench spark-prewarm >/dev/null || rc=1
[ $rc -eq 0 ] && echo "build-variant: $out/spark-bench, $out/spark-prewarm"
exit $rc

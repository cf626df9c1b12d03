#!/usr/bin/env bash
# Packs what a GPU machine needs into build-device/: libspark.so, the test binaries and the
# tools.  libspark.so needs only glibc and the C++ runtime, the tools and CPU tests link the
# internals statically, and the binaries that load libspark.so find it through RPATH $ORIGIN/..
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
out=build-device
rm -rf "$out" && mkdir -p "$out/tests" "$out/tools"
cp -P "$build"/libspark.so* "$out/"
for t in "$build"/tests/test_*; do [ -x "$t" ] && [ -f "$t" ] && cp "$t" "$out/tests/"; done
for t in "$build"/tools/spark-*; do [ -x "$t" ] && [ -f "$t" ] && cp "$t" "$out/tools/"; done
strip --strip-debug "$out"/libspark.so.*.* "$out"/tests/* "$out"/tools/* 2>/dev/null || true
du -sh "$out"

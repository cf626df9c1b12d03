#!/usr/bin/env bash
# Packs what the GPU machine needs into build-device/ (binaries with the Debian-only
# shared libraries beside them; the RPATHs find them there), for `device run` to carry.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
out=build-device
rm -rf "$out" && mkdir -p "$out/lib" "$out/tests" "$out/tools"
cp "$build/libspark.so" "$out/"
for t in "$build"/tests/test_*; do [ -x "$t" ] && [ -f "$t" ] && cp "$t" "$out/tests/"; done
for t in "$build"/tools/spark-*; do [ -x "$t" ] && [ -f "$t" ] && cp "$t" "$out/tools/"; done
for lib in libfmt.so.9 libspdlog.so.1.10 libxxhash.so.0; do cp -L "/lib/x86_64-linux-gnu/$lib" "$out/lib/"; done
strip --strip-debug "$out"/libspark.so "$out"/tests/* "$out"/tools/* 2>/dev/null || true
du -sh "$out"

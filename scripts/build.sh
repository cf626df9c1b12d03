#!/usr/bin/env bash
# Configures and builds spark into build/ (BUILD_DIR overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
export PATH="$PATH:/usr/local/cuda/bin"
# Configured unless a configure has completed (a failed one leaves CMakeCache.txt without
# build.ninja; configuring again picks up what was missing, e.g. after install-deps.sh).
[ -f "$build/build.ninja" ] || [ -f "$build/Makefile" ] ||
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "$(nproc)"

#!/usr/bin/env bash
# Builds (if needed) and runs the whole test suite.  GPU tests skip with a message
# where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
exec ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"

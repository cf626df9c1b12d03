#!/usr/bin/env bash
# Builds (if needed) and runs the whole test suite: ctest, then the Python package's tests
# (scripts/test-python.sh).  GPU tests skip with a message where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
status=0
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" || status=$?
scripts/test-python.sh || status=$?
exit $status

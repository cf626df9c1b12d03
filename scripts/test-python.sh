#!/usr/bin/env bash
# The Python package's tests: builds the wheel (pip + scikit-build-core over the same
# CMakeLists.txt), installs it into $BUILD_DIR/python-site (nothing outside the build folder)
# and runs tests/python against it.  The torch tests skip where torch is not importable, the
# GPU tests where there is no device; the whole step skips, saying why, without pytest or
# scikit-build-core (scripts/install-deps.sh --ci installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
py=${PYTHON:-python3}
skip() { echo "test-python: SKIPPED: $*" >&2; exit 0; }
command -v "$py" >/dev/null || skip "no $py"
"$py" -c "import pytest" 2>/dev/null || skip "pytest is not installed ($py -m pip install pytest)"
"$py" -c "import scikit_build_core" 2>/dev/null ||
  skip "scikit-build-core is not installed ($py -m pip install scikit-build-core)"
mkdir -p "$build"
build=$(cd "$build" && pwd)
site=$build/python-site
rm -rf "$build/python-wheel" "$site"
export PATH="$PATH:/usr/local/cuda/bin"
# No build isolation: the backend installed here, no download.  The CMake build folder is
# kept, so a second run rebuilds only what changed.
"$py" -m pip wheel --no-build-isolation --no-deps --quiet -w "$build/python-wheel" \
  -C "build-dir=$build/python-build" .
"$py" -m pip install --no-deps --no-index --quiet --target "$site" "$build"/python-wheel/*.whl
"$py" -c "import torch" 2>/dev/null || echo "test-python: torch is not importable: the torch op's tests are skipped" >&2
cd tests/python
PYTHONPATH=$site exec "$py" -m pytest -q -ra -p no:cacheprovider .

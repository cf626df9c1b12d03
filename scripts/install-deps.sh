#!/usr/bin/env bash
# Installs the Debian packages spark builds with (needs root or sudo).  The CUDA toolkit
# (nvcc headers, NVRTC, cuBLAS) is expected at /usr/local/cuda.
#   --ci   also what CI's sanitizer and fuzz jobs need (clang with libFuzzer), and the Python
#          package's build backend and test tools (scikit-build-core, pytest, torch)
set -euo pipefail
packages=(cmake ninja-build g++ pkgconf libfmt-dev nlohmann-json3-dev libspdlog-dev doctest-dev libcli11-dev libxxhash-dev
          libarchive-dev zstd)
if [ "${1:-}" = "--ci" ]; then
  packages+=(clang libclang-rt-14-dev)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ ! -e /usr/local/cuda/include/nvrtc.h ] && ! command -v nvcc >/dev/null; then
  echo "install-deps: the CUDA toolkit (with NVRTC) was not found under /usr/local/cuda" >&2
  exit 1
fi

# The Python tests (scripts/test-python.sh).  torch from PyPI is a CUDA build whose wheel pulls
# gigabytes of nvidia-* packages; without them it only needs the CUDA libraries it links at
# import, which the toolkit here provides except cuFile, cuSPARSELt and NVSHMEM (three small
# wheels).  So: torch --no-deps, those three, and its pure-Python dependencies.  A failure
# leaves torch out and the torch tests skip; it does not fail the job.
if [ "${1:-}" = "--ci" ]; then
  py=${PYTHON:-python3}
  pip=("$py" -m pip install --quiet --disable-pip-version-check)
  "${pip[@]}" scikit-build-core pytest
  if ! "$py" -c "import torch" 2>/dev/null; then
    if ! { "${pip[@]}" filelock typing-extensions sympy networkx jinja2 fsspec numpy &&
           "${pip[@]}" --no-deps "torch==${SPARK_CI_TORCH:-2.11.0}" nvidia-cusparselt-cu13 nvidia-nvshmem-cu13 \
             nvidia-cufile && "$py" -c "import torch"; }; then
      echo "install-deps: torch could not be installed or imported; the torch op's tests will skip" >&2
    fi
  fi
fi

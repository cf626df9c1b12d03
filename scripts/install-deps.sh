#!/usr/bin/env bash
# Installs the Debian packages spark builds with (needs root or sudo).  The CUDA toolkit
# (nvcc headers, NVRTC, cuBLAS) is expected at /usr/local/cuda.
#   --ci   also what CI's sanitizer and fuzz jobs need (clang with libFuzzer)
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

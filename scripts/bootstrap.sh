#!/usr/bin/env bash
# A fresh machine to a filled cache: install dependencies, build, and prewarm the
# kernels of a default model preset (GLM-5 at TP 8).  Needs no GPU: without one the
# kernels are compiled for sm_90a (H100/H200).  Extra arguments go to spark-prewarm.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
if (($#)); then
  exec build/tools/spark-prewarm "$@"
fi
exec build/tools/spark-prewarm --model glm5 --tp 8

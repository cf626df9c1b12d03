#!/usr/bin/env bash
# The include direction of spark's folders (docs/architecture.md): each layer includes only
# itself and the layers below it, so the JIT core never sees an op and the cache never sees
# the compiler.
#
#   core  <  cache  <  jit  <  runtime  <  ops  <  api  <  tools
#
# templates/ is device code: it includes only templates/.  An op includes no other op's
# headers (ops/common/, what they share, aside); ops/registry.cpp, the list of ops, includes them all.  Prints every include that points
# the wrong way and exits 1 if there is one.
set -euo pipefail
cd "$(dirname "$0")/.."

rank() {
  case "$1" in
    core) echo 0 ;; cache) echo 1 ;; jit) echo 2 ;; runtime) echo 3 ;; ops) echo 4 ;; api) echo 5 ;;
    tools) echo 6 ;; *) echo -1 ;;
  esac
}

bad=0
while IFS= read -r file; do
  layer=${file%%/*}
  mine=$(rank "$layer")
  while IFS= read -r line; do
    inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$line")
    if [[ $layer == templates ]]; then
      # Device code includes its siblings by bare name (NVRTC's embedded headers).
      [[ $inc == */* ]] && { echo "$file: includes $inc (templates include only templates)"; bad=1; }
      continue
    fi
    top=${inc%%/*}
    [[ $inc == */* ]] || continue   # a sibling in the same folder
    [[ $top == spark ]] && continue # the public header (include/spark/spark.h)
    [[ $top == templates && $layer == ops ]] && continue  # an op's host+device params header
    theirs=$(rank "$top")
    if (( theirs < 0 )); then
      echo "$file: includes $inc, which is in no layer"; bad=1
    elif (( theirs > mine )); then
      echo "$file: includes $inc ($top is above $layer)"; bad=1
    fi
    # One op never includes another's headers.
    if [[ $layer == ops && $top == ops && $file != ops/registry.cpp ]]; then
      op=$(cut -d/ -f2 <<<"$file"); their_op=$(cut -d/ -f2 <<<"$inc")
      [[ $op == "$their_op" || $their_op == common ]] || { echo "$file: includes $inc (another op)"; bad=1; }
    fi
  done < <(grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" || true)
done < <(git ls-files 'core/*' 'cache/*' 'jit/*' 'runtime/*' 'ops/*' 'api/*' 'tools/*' 'templates/*' |
         grep -E '\.(h|hpp|cpp|cu|cuh)$')

if (( bad )); then
  echo "check-layers: includes point the wrong way (see docs/architecture.md)" >&2
  exit 1
fi
echo "check-layers: every include points down"

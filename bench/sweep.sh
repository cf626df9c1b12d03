#!/usr/bin/env bash
# Times alternative M-regime tables (SPARK_REGIMES) on a subset of shapes, one
# spark-bench run per table, so a tiling change is decided by measurement.
# Usage: bench/sweep.sh BENCH OUTDIR [spark-bench flags...]; tables come from $SWEEP_TABLES
# (newline-separated "name=table" lines; "default" runs the built-in table).
set -uo pipefail
bench=$1 out=$2
shift 2
while IFS= read -r line; do
  [ -n "$line" ] || continue
  name=${line%%=*} table=${line#*=}
  if [ "$name" = default ]; then
    unset SPARK_REGIMES
  else
    export SPARK_REGIMES=$table
  fi
  echo "== $name ${SPARK_REGIMES:-}"
  "$bench" "$@" --json "$out/sweep-$name.json" > "$out/sweep-$name.log" 2>&1
  echo "rc=$?"
  grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ " "$out/sweep-$name.log" | awk '{printf "  H%-4s K%s M%-5s %-5s %-4s spark %8s staged %8s ratio %s frac %s\n", $1,$2,$3,$4,$5,$8,$9,$10,$13}'
done <<< "$SWEEP_TABLES"

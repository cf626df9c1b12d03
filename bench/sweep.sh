#!/usr/bin/env bash
# Times alternative tile tables on a subset of shapes, one spark-bench run per table, so a
# tiling change is decided by measurement.
# Usage: bench/sweep.sh BENCH OUTDIR [spark-bench flags...]; tables come from $SWEEP_TABLES
# (newline-separated "name=table" lines; "default" runs the built-in table) and set
# $SWEEP_VAR: SPARK_REGIMES (the default; the query projection) or SPARK_OPROJ_TILES (the value
# up-projection, with --op oproj among the flags).
set -uo pipefail
bench=$1 out=$2
shift 2
var=${SWEEP_VAR:-SPARK_REGIMES}
case $var in
  SPARK_REGIMES | SPARK_OPROJ_TILES) ;;
  *) echo "sweep.sh: SWEEP_VAR '$var' is not SPARK_REGIMES or SPARK_OPROJ_TILES" >&2; exit 2 ;;
esac
while IFS= read -r line; do
  [ -n "$line" ] || continue
  name=${line%%=*} table=${line#*=}
  if [ "$name" = default ]; then
    unset "$var"
  else
    export "$var=$table"
  fi
  echo "== $name ${!var:-}"
  "$bench" "$@" --json "$out/sweep-$name.json" > "$out/sweep-$name.log" 2>&1
  echo "rc=$?"
  # The table's rows: H, K or V, M, weights, out, pitch, layers, |, spark, staged, ratio, |,
  # floor, frac, GB/s, |, check.
  grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ " "$out/sweep-$name.log" | awk '{printf "  H%-4s %s M%-5s %-9s %-4s spark %8s staged %8s ratio %s frac %s\n", $1,$2,$3,$4,$5,$9,$10,$11,$14}'
done <<< "$SWEEP_TABLES"

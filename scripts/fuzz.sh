#!/usr/bin/env bash
# Builds the libFuzzer targets (build-fuzz/, clang, ASan + UBSan) if needed and runs each for
# SECONDS (default 60) on a working copy of its committed corpus:
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]        TARGET: kernel_key, regimes, ... (default: all)
#
# New inputs go to build-fuzz/corpus/<target>/ (tests/fuzz/corpus/ is only read), findings to
# build-fuzz/findings/<target>/, the full output to build-fuzz/logs/<target>.log.  Prints the
# executions, coverage and any crash file per target; exits non-zero on any finding.
# FUZZ_ARGS adds libFuzzer flags, e.g. FUZZ_ARGS=-runs=1000000 scripts/fuzz.sh 0 regimes
# (SECONDS = 0: no time limit).  BUILD_DIR overrides build-fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
[[ $seconds =~ ^[0-9]+$ ]] || { echo "usage: $0 [SECONDS] [TARGET...]" >&2; exit 2; }
shift $(( $# > 0 ? 1 : 0 ))
build=${BUILD_DIR:-build-fuzz}
export PATH="$PATH:/usr/local/cuda/bin"

if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSPARK_BUILD_FUZZERS=ON -DSPARK_BUILD_TESTS=OFF -DSPARK_BUILD_BENCH=OFF >/dev/null
else
  cmake "$build" >/dev/null  # picks up a spark_fuzzer() line added since
fi

declare -A max_len
while read -r name len; do
  [ -n "$name" ] && max_len[$name]=$len
done < "$build/tests/fuzz/fuzzers.txt"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cut -d' ' -f1 "$build/tests/fuzz/fuzzers.txt" | sed '/^$/d')
fi
for t in "${targets[@]}"; do
  [ -n "${max_len[$t]:-}" ] || { echo "unknown fuzz target '$t' (known: ${!max_len[*]})" >&2; exit 2; }
done
cmake --build "$build" --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
printf '\n%-20s %12s %8s %8s  %s\n' target executions seconds cov finding
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t" findings="$build/findings/$t" log="$build/logs/$t.log"
  mkdir -p "$corpus" "$findings" "$build/logs"
  if [ -d "tests/fuzz/corpus/$t" ]; then cp -f "tests/fuzz/corpus/$t"/* "$corpus"/ 2>/dev/null || true; fi
  rc=0 start=$(date +%s)
  # shellcheck disable=SC2086  # FUZZ_ARGS is a list of flags
  "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -max_len="${max_len[$t]}" -timeout=25 \
    -print_final_stats=1 -artifact_prefix="$findings/" ${FUZZ_ARGS:-} "$corpus" >"$log" 2>&1 || rc=$?
  took=$(( $(date +%s) - start ))
  # A run that stops on a seed prints no coverage line: nothing below may fail the script.
  execs=$({ sed -n 's/^stat::number_of_executed_units: *//p' "$log" || true; } | tail -1)
  cov=$({ grep -o 'cov: [0-9]*' "$log" || true; } | tail -1 | cut -d' ' -f2)
  finding=$({ sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" || true; } | tail -1)
  if [ "$rc" -ne 0 ]; then
    failed+=("$t")
    finding="${finding:-exit status $rc, see $log}"
  fi
  printf '%-20s %12s %8s %8s  %s\n' "$t" "${execs:-?}" "${took:-?}" "${cov:-?}" "${finding:--}"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "findings in: ${failed[*]} (reproduce: $build/tests/fuzz/fuzz_<target> <crash file>)" >&2
  exit 1
fi

#!/usr/bin/env bash
# The CPU suite under sanitizers, as CI runs it (no GPU needed):
#
#   scripts/sanitize.sh [address|thread]...      (default: both)
#
# address: build-asan/ with ASan + UBSan (-fno-sanitize-recover: the first error aborts the
#          test), every test labelled cpu but those of the installed package (a sanitized
#          libspark.so needs the sanitizer runtimes, and its consumers would too), leaks
#          checked at exit.
# thread:  build-tsan/ with TSan, the tests that run spark from many threads at once: the
#          runtime on the fake driver (plans and the module table from 8 threads), the log
#          callback called from many threads while it is swapped, the C
#          API's per-thread errors, the cache's concurrent stores and prewarms.
# BUILD_PREFIX overrides the build folders' prefix ("build").
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
prefix=${BUILD_PREFIX:-build}
jobs=("$@")
[ ${#jobs[@]} -gt 0 ] || jobs=(address thread)

configure() {  # dir sanitizers
  [ -f "$1/CMakeCache.txt" ] || cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSPARK_SANITIZE="$2" -DSPARK_BUILD_BENCH=OFF >/dev/null
}

for job in "${jobs[@]}"; do
  case "$job" in
    address)
      dir="$prefix-asan"
      configure "$dir" address,undefined
      cmake --build "$dir" -j "$(nproc)"
      export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:abort_on_error=0
      export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
      log="$dir/sanitize-address.log"
      if ! ctest --test-dir "$dir" -L cpu -LE package --output-on-failure -j "$(nproc)" 2>&1 | tee "$log"; then
        # LeakSanitizer's own tracer, which stops every thread at exit to scan for leaks, has
        # crashed now and then ("Tracer caught signal 11 ... LeakSanitizer has encountered a
        # fatal error") in a process that ended well; a leak it found reads "detected memory
        # leaks" instead.  Only when every failure is that crash are the failed tests run again,
        # once.
        if grep -q 'LeakSanitizer has encountered a fatal error' "$log" &&
           ! grep -qE 'LeakSanitizer: detected memory leaks|AddressSanitizer:|runtime error:' "$log"; then
          echo "sanitize: LeakSanitizer's tracer crashed (not a leak report); running the failed tests again" >&2
          ctest --test-dir "$dir" --rerun-failed --output-on-failure
        else
          exit 1
        fi
      fi
      unset ASAN_OPTIONS UBSAN_OPTIONS
      ;;
    thread)
      dir="$prefix-tsan"
      configure "$dir" thread
      tests=(test_driver_failures test_log_callback test_validation test_cache test_cache_processes)
      cmake --build "$dir" -j "$(nproc)" --target "${tests[@]}"
      regex="^($(IFS='|'; echo "${tests[*]}"))\$"
      TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/sanitizers/tsan.supp" \
        ctest --test-dir "$dir" -R "$regex" --output-on-failure -j "$(nproc)"
      ;;
    *) echo "usage: $0 [address|thread]..." >&2; exit 2 ;;
  esac
done

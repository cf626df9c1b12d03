#!/usr/bin/env bash
# libspark.so is self-contained and exports the C API alone:
#   - NEEDED names only glibc's and the C++ runtime's libraries (fmt, spdlog and xxHash are
#     compiled in; libcuda and NVRTC are opened at run time);
#   - the defined dynamic symbols are exactly the functions spark.h declares SPARK_API.
#   check_library.sh LIBSPARK_SO SPARK_H
set -euo pipefail
lib=$1 header=$2
fail=0
allowed='^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libstdc\+\+\.so\.6|libgcc_s\.so\.1|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1)$'
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "NEEDED: $(echo $needed)"
for n in $needed; do
  [[ $n =~ $allowed ]] || { echo "FAIL: libspark.so needs $n" >&2; fail=1; }
done
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libspark.so.0 ] || { echo "FAIL: SONAME '$soname', expected libspark.so.0" >&2; fail=1; }

# Declared: every `SPARK_API <type> name(` in the header, declarations spanning lines joined.
declared=$(grep -v '^ *#' "$header" | tr '\n' ' ' | grep -o 'SPARK_API [^;(]*(' | sed 's/ *($//; s/.*[ *]//' | sort -u)
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWwVvDdBbRr]$/ {print $3}' | sed 's/@.*//' | sort -u)
echo "exported: $(echo $exported)"
if [ "$declared" != "$exported" ]; then
  echo "FAIL: exported symbols differ from spark.h's SPARK_API functions:" >&2
  diff <(echo "$declared") <(echo "$exported") | sed 's/^</  declared only:/; s/^>/  exported only:/' | grep only >&2
  fail=1
fi
[ -n "$declared" ] || { echo "FAIL: no SPARK_API declaration found in $header" >&2; fail=1; }
exit $fail

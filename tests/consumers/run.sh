#!/usr/bin/env bash
# Installs spark to a temporary prefix and builds and runs three consumers against it:
# C99 through pkg-config, C++ through find_package(spark), and C++ with spark as a
# subproject (add_subdirectory of the checkout, built from scratch).
#   run.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
build=$1 src=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }

echo "== cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
libdir=$(sed -n 's/^libdir=${prefix}\///p' "$prefix"/lib*/pkgconfig/spark.pc)
[ -n "$libdir" ] || fail "no lib*/pkgconfig/spark.pc with a libdir"
for f in include/spark/spark.h "$libdir/libspark.so" "$libdir/libspark.so.0" bin/spark-prewarm bin/spark-cache \
         "$libdir/cmake/spark/sparkConfig.cmake" "$libdir/cmake/spark/sparkConfigVersion.cmake" \
         "$libdir/cmake/spark/sparkTargets.cmake" "$libdir/pkgconfig/spark.pc"; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
real=$(readlink -f "$prefix/$libdir/libspark.so")
[[ $(basename "$real") =~ ^libspark\.so\.0\.[0-9]+\.[0-9]+$ ]] || fail "libspark.so points at $(basename "$real")"
soname=$(readelf -d "$real" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libspark.so.0 ] || fail "SONAME is '$soname', expected libspark.so.0"
"$prefix/bin/spark-prewarm" --help >/dev/null || fail "installed spark-prewarm --help"
"$prefix/bin/spark-cache" --help >/dev/null || fail "installed spark-cache --help"
echo "installed: $(cd "$prefix" && find . -type f -o -type l | sort | tr '\n' ' ')"

echo "== C99 via pkg-config"
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
flags=$(pkg-config --cflags --libs spark)
cc -std=c99 -pedantic-errors -Wall -Wextra -Werror "$here/consumer.c" -o "$work/c99_consumer" $flags \
  -Wl,-rpath,"$prefix/$libdir"
readelf -d "$work/c99_consumer" | grep -q 'NEEDED.*\[libspark.so.0\]' || fail "c99 consumer does not need libspark.so.0"
"$work/c99_consumer"

echo "== C++ via find_package(spark)"
cmake -S "$here/find_package" -B "$work/find_package" -DCMAKE_PREFIX_PATH="$prefix" >"$work/find_package.log"
cmake --build "$work/find_package" >>"$work/find_package.log"
"$work/find_package/consumer"

echo "== C++ via add_subdirectory(spark)"
cmake -S "$here/subproject" -B "$work/subproject" -DSPARK_SOURCE_DIR="$src" >"$work/subproject.log"
for t in test_cache spark-prewarm spark-bench; do
  ! grep -q "^$t:" <(cmake --build "$work/subproject" --target help 2>/dev/null) || fail "subproject defines $t"
done
cmake --build "$work/subproject" -j "$(nproc)" >>"$work/subproject.log" || { tail -30 "$work/subproject.log"; fail "subproject build"; }
"$work/subproject/consumer"
echo "all three consumers built and ran"

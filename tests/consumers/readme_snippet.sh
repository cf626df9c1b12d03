#!/usr/bin/env bash
# The README's C block (the first ```c fence) compiles as C99 with -Wall -Wextra -Werror
# against the public header, so the example a new user copies is one that builds.
#   readme_snippet.sh README_MD INCLUDE_DIR WORK_DIR
set -euo pipefail
readme=$1 include=$2 work=$3
mkdir -p "$work"
awk '/^```c$/ {inside = 1; next} inside && /^```$/ {exit} inside' "$readme" >"$work/readme_snippet.c"
[ -s "$work/readme_snippet.c" ] || { echo "FAIL: no \`\`\`c block in $readme" >&2; exit 1; }
cc -std=c99 -pedantic-errors -Wall -Wextra -Werror -I"$include" -c "$work/readme_snippet.c" -o "$work/readme_snippet.o"
echo "the README's C block ($(wc -l <"$work/readme_snippet.c") lines) compiles"

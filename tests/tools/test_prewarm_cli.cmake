# spark-prewarm on an empty temporary cache: the first run compiles everything, the
# second compiles nothing; bad flags exit non-zero with a message.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

execute_process(COMMAND ${PREWARM} --model glm5 --tp 8 --arch sm_90a --max-m 64 --cache-dir ${WORK}/cache -j 2
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "first prewarm failed (${rc})")
endif()
# A model brings both ops: the query projection's 3 regimes x 2 outputs, and the value
# up-projection's (V = 256 for GLM-5) 4 regimes x 2 outputs.
if(NOT out MATCHES "spark-prewarm: 14 compiled, 0 cached, 0 failed" OR NOT out MATCHES "mla_oproj.h8.v256.l512.m33-64")
  message(FATAL_ERROR "first prewarm should compile 14 kernels (query: 3 regimes x 2 outputs; value: 4 x 2)")
endif()

execute_process(COMMAND ${PREWARM} --model glm5 --tp 8 --arch sm_90a --max-m 64 --cache-dir ${WORK}/cache --json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\"compiled\": 0" OR NOT out MATCHES "\"cached\": 14")
  message(FATAL_ERROR "second prewarm should find all 14 cached (${rc}):\n${out}${err}")
endif()

# Without NVRTC (SPARK_NVRTC_LIBRARY naming no file): the cached kernels still load, a kernel
# to compile fails saying NVRTC is missing.
execute_process(COMMAND ${CMAKE_COMMAND} -E env SPARK_NVRTC_LIBRARY=${WORK}/no-libnvrtc.so
                        ${PREWARM} --model glm5 --tp 8 --arch sm_90a --max-m 64 --cache-dir ${WORK}/cache --json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\"cached\": 14")
  message(FATAL_ERROR "without NVRTC the prewarmed kernels must still be found (${rc}):\n${out}${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env SPARK_NVRTC_LIBRARY=${WORK}/no-libnvrtc.so
                        ${PREWARM} --model glm5 --tp 8 --arch sm_90a --max-m 16 --out bf16 --cache-dir ${WORK}/fresh
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT out MATCHES "cannot load NVRTC")
  message(FATAL_ERROR "without NVRTC a compile must fail naming NVRTC (${rc}):\n${out}${err}")
endif()

# Usage errors exit 2 and name the flag as it is typed (never max_m, nope_dim).
foreach(case "--tp;--model;glm5;--tp;7" "--nope;--heads;8;--nope;64" "--nope;--heads;8;--nope"
             "--max-m;--heads;8;--nope;128;--max-m;0" "--max-m;--heads;8;--nope;128;--max-m;many"
             "--arch;--heads;8;--nope;128;--arch;sm_90a,sm_75" "--frobnicate;--frobnicate")
  list(GET case 0 flag)
  list(REMOVE_AT case 0)
  execute_process(COMMAND ${PREWARM} ${case} --cache-dir ${WORK}/cache
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "${flag}" OR err MATCHES "max_m|nope_dim")
    message(FATAL_ERROR "'${case}' must exit 2 naming ${flag} (${rc}): ${out}${err}")
  endif()
endforeach()
# ... and with --json, as a JSON object on stdout.
execute_process(COMMAND ${PREWARM} --model glm5 --tp 7 --json --cache-dir ${WORK}/cache
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(JSON status GET "${out}" status)
string(JSON error GET "${out}" error)
if(NOT rc EQUAL 2 OR NOT status STREQUAL "usage" OR NOT error MATCHES "--tp")
  message(FATAL_ERROR "--json usage error (${rc}):\n${out}${err}")
endif()

# --version, --help with defaults.
execute_process(COMMAND ${PREWARM} --version RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^spark-prewarm [0-9.]+\n" OR NOT out MATCHES "cache format +[0-9]+"
   OR NOT out MATCHES "NVRTC loaded +[0-9]+\\.[0-9]+" OR NOT out MATCHES "sm_103a")
  message(FATAL_ERROR "--version (${rc}):\n${out}${err}")
endif()
execute_process(COMMAND ${PREWARM} --help RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "--max-m[^\n]*=8192" OR NOT out MATCHES "--weights[^\n]*=\\[?bf16")
  message(FATAL_ERROR "--help must show the defaults (${rc}):\n${out}${err}")
endif()

# Several targets in one run, B300 (sm_103a) among them.
execute_process(COMMAND ${PREWARM} --heads 8 --nope 128 --max-m 16 --out bf16 --arch sm_90a,sm_103a --json
                        --cache-dir ${WORK}/multi
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(JSON compiled GET "${out}" compiled)
string(JSON second GET "${out}" kernels 1 key)
if(NOT rc EQUAL 0 OR NOT compiled EQUAL 2 OR NOT second MATCHES "\\.sm_103a$")
  message(FATAL_ERROR "--arch sm_90a,sm_103a (${rc}):\n${out}${err}")
endif()
# GLM-5 at TP 6 runs 11 heads per rank (padded); other sizes that do not divide the heads fail.
execute_process(COMMAND ${PREWARM} --model glm5 --tp 6 --arch sm_90a --max-m 16 --out bf16 --cache-dir ${WORK}/cache
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "h11\\.k192")
  message(FATAL_ERROR "--model glm5 --tp 6 must prewarm 11 heads (${rc}): ${out}${err}")
endif()

# One way to name the shapes at a time; --tp only with --model.
foreach(args "--model;glm5;--heads;8;--nope;128" "--tp;8;--heads;8;--nope;128" "--spec;x.json;--heads;8")
  execute_process(COMMAND ${PREWARM} ${args} --arch sm_90a --cache-dir ${WORK}/cache
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "excludes|requires")
    message(FATAL_ERROR "'${args}' must be refused (${rc}): ${out}${err}")
  endif()
endforeach()

# A spec file with an unknown key, or a value of the wrong type, fails naming --spec.
file(WRITE ${WORK}/typo.json "{\"heads\": [8], \"nope\": [128], \"weight\": [\"mxfp8\"]}")
file(WRITE ${WORK}/type.json "{\"heads\": [8], \"nope\": [128], \"max_m\": \"64\"}")
foreach(f typo type)
  execute_process(COMMAND ${PREWARM} --spec ${WORK}/${f}.json --arch sm_90a --cache-dir ${WORK}/cache
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "--spec")
    message(FATAL_ERROR "${f}.json must fail naming --spec (${rc}): ${out}${err}")
  endif()
endforeach()

# Kernels that end up outside the cache are failures: a cache that cannot be written (its
# root under a regular file), and a size cap that evicts them as the later ones land.
file(WRITE ${WORK}/file "not a directory")
# (With a mistyped SPARK_LOG_LEVEL, which must not silence the log's warnings.)
execute_process(COMMAND ${CMAKE_COMMAND} -E env SPARK_LOG_LEVEL=warnings
                        ${PREWARM} --heads 8 --nope 128 --max-m 16 --out bf16 --arch sm_90a --cache-dir ${WORK}/file/c
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT out MATCHES "not cached")
  message(FATAL_ERROR "an unwritable cache must fail the prewarm (${rc}): ${out}${err}")
endif()
if(NOT err MATCHES "SPARK_LOG_LEVEL 'warnings'" OR NOT err MATCHES "not writable")
  message(FATAL_ERROR "a mistyped SPARK_LOG_LEVEL must warn and keep warnings: ${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env SPARK_CACHE_MAX_BYTES=1
                        ${PREWARM} --heads 8 --nope 128 --max-m 64 --out bf16 --arch sm_90a --cache-dir ${WORK}/capped -q
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT out MATCHES "evicted")
  message(FATAL_ERROR "a cap that evicts prewarmed kernels must fail the prewarm (${rc}): ${out}${err}")
endif()

file(REMOVE_RECURSE ${WORK})

# --v-head-dim adds the value up-projection to explicit shapes; a V it does not implement, or
# the flag without --heads, is a usage error naming it.
execute_process(COMMAND ${PREWARM} --heads 8 --nope 128 --v-head-dim 128 --arch sm_90a --max-m 16 --out bf16
                        --cache-dir ${WORK}/vdim --json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\"compiled\": 3" OR NOT out MATCHES "mla_oproj\\.h8\\.v128\\.l512\\.m1-8\\.wbf16\\.obf16\\.sm_90a"
   OR NOT out MATCHES "mla_oproj\\.h8\\.v128\\.l512\\.m9-16\\.wbf16\\.obf16\\.sm_90a")
  message(FATAL_ERROR "--v-head-dim 128 must add the two oproj decode kernels (${rc}):\n${out}${err}")
endif()
foreach(args "--heads;8;--nope;128;--v-head-dim;192" "--model;glm5;--v-head-dim;128")
  execute_process(COMMAND ${PREWARM} ${args} --arch sm_90a --cache-dir ${WORK}/vdim
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT "${out}${err}" MATCHES "--v-head-dim")
    message(FATAL_ERROR "${args}: expected exit 2 naming --v-head-dim (${rc}):\n${out}${err}")
  endif()
endforeach()

# SPARK_OPROJ_SCHEDULE=stationary renders the value up-projection's M 17-32 kernel on the
# weight-stationary schedule: an entry of its own beside the default (a ring at 8 heads) (the other four keys
# come from the cache).  A value it does not know fails those keys, naming the variable.
set(sched_args --heads 8 --nope 128 --v-head-dim 128 --arch sm_90a --max-m 32 --out bf16 --weights bf16
               --cache-dir ${WORK}/sched --json)
execute_process(COMMAND ${PREWARM} ${sched_args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\"compiled\": 5")
  message(FATAL_ERROR "a fresh cache must compile five kernels (${rc}):\n${out}${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env SPARK_OPROJ_SCHEDULE=stationary ${PREWARM} ${sched_args}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\"cached\": 4" OR NOT out MATCHES "\"compiled\": 1")
  message(FATAL_ERROR "the stationary schedule must compile only the M 17-32 oproj kernel anew (${rc}):\n${out}${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env SPARK_OPROJ_SCHEDULE=bogus ${PREWARM} ${sched_args}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "SPARK_OPROJ_SCHEDULE: 'bogus' is not a schedule")
  message(FATAL_ERROR "SPARK_OPROJ_SCHEDULE=bogus must fail naming the variable (${rc}):\n${out}${err}")
endif()
# SPARK_OPROJ_TILES (the tuning override) brings its own regimes: M up to 32 needs its 1-8 and
# 9-64 kernels (on sm_80 too, where wg falls back to tiled); a broken item, or setting it
# beside SPARK_OPROJ_SCHEDULE, fails naming the variable and the rule.
execute_process(COMMAND ${CMAKE_COMMAND} -E env "SPARK_OPROJ_TILES=1-8:32x16x1,9-64:wg:6,65-8192:64x4x2"
                        ${PREWARM} --heads 8 --nope 128 --v-head-dim 128 --arch sm_90a,sm_80 --max-m 32 --out bf16
                        --weights bf16 --cache-dir ${WORK}/tiles
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "mla_oproj[.]h8[.]v128[.]l512[.]m1-8[.]wbf16[.]obf16[.]sm_90a"
   OR NOT out MATCHES "mla_oproj[.]h8[.]v128[.]l512[.]m9-64[.]wbf16[.]obf16[.]sm_80" OR out MATCHES "m65-8192")
  message(FATAL_ERROR "SPARK_OPROJ_TILES must give the oproj keys its own regimes (${rc}):\n${out}${err}")
endif()
foreach(case "1-8:32x16x1,9-8192:128x4x2|16 / KSPLIT \\+ TM must be at most 5"
             "1-8:32x16x1|the regimes must end at M = 8192")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 value)
  list(GET parts 1 rule)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env "SPARK_OPROJ_TILES=${value}" ${PREWARM} ${sched_args}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "SPARK_OPROJ_TILES: .*${rule}")
    message(FATAL_ERROR "SPARK_OPROJ_TILES=${value} must fail naming the variable and '${rule}' (${rc}):\n${out}${err}")
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -E env SPARK_OPROJ_SCHEDULE=stationary "SPARK_OPROJ_TILES=1-8192:wg:10"
                        ${PREWARM} ${sched_args}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "SPARK_OPROJ_TILES and SPARK_OPROJ_SCHEDULE are both set")
  message(FATAL_ERROR "setting both oproj variables must fail naming them (${rc}):\n${out}${err}")
endif()
file(REMOVE_RECURSE ${WORK})

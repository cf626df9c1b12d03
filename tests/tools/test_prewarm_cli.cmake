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
if(NOT out MATCHES "spark-prewarm: 6 compiled, 0 cached, 0 failed")
  message(FATAL_ERROR "first prewarm should compile 6 kernels (3 regimes x 2 outputs)")
endif()

execute_process(COMMAND ${PREWARM} --model glm5 --tp 8 --arch sm_90a --max-m 64 --cache-dir ${WORK}/cache --json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\"compiled\": 0" OR NOT out MATCHES "\"cached\": 6")
  message(FATAL_ERROR "second prewarm should find all 6 cached (${rc}):\n${out}${err}")
endif()

execute_process(COMMAND ${PREWARM} --model glm5 --tp 7 --arch sm_90a --cache-dir ${WORK}/cache
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "tp")
  message(FATAL_ERROR "--tp 7 must fail naming tp (${rc}): ${out}${err}")
endif()

execute_process(COMMAND ${PREWARM} --heads 8 --nope 64 --arch sm_90a --max-m 16 --cache-dir ${WORK}/cache
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT out MATCHES "nope_dim")
  message(FATAL_ERROR "--nope 64 must fail naming nope_dim (${rc}): ${out}${err}")
endif()
file(REMOVE_RECURSE ${WORK})

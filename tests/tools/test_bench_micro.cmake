# The micro-benchmarks under bench/micro compile: each .cu with nvcc -c for sm_90a, spark's public
# header on the include path (oproj_timeline.cu uses the C API).  They are never run by ctest:
# they need a GPU and are run by hand (bench/README.md).
#   cmake -DNVCC=... [-DHOST_COMPILER=...] -DSRC=<source root> -DWORK=<scratch folder> -P test_bench_micro.cmake
file(GLOB sources ${SRC}/bench/micro/*.cu)
list(LENGTH sources count)
if(count EQUAL 0)
  message(FATAL_ERROR "no .cu files under ${SRC}/bench/micro")
endif()
file(MAKE_DIRECTORY ${WORK})
set(failed "")
foreach(src IN LISTS sources)
  get_filename_component(name ${src} NAME_WE)
  set(host "")
  if(HOST_COMPILER)
    set(host -ccbin "${HOST_COMPILER}")
  endif()
  execute_process(COMMAND "${NVCC}" ${host} -std=c++17 -arch=sm_90a -c ${src} -I${SRC}/include -o ${WORK}/${name}.o
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(STATUS "bench/micro/${name}.cu does not compile (${NVCC}: ${rc}):\n${out}")
    list(APPEND failed ${name})
  endif()
endforeach()
if(failed)
  message(FATAL_ERROR "bench/micro: ${failed} failed to compile")
endif()
message(STATUS "bench/micro: ${count} files compile")

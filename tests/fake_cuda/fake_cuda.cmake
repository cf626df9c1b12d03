# The fake CUDA driver and the test that runs spark's CUDA failure paths on it.  Included
# from tests/CMakeLists.txt (include(), not add_subdirectory(), so that spark_test() finds
# support/ and the test binary sits beside the others).
#
# The fake is a library whose soname is libcuda.so.1.  Only test_driver_failures and
# test_log_callback (tests/CMakeLists.txt) link it: their DT_NEEDED libcuda.so.1 is found
# through each binary's RPATH, which CMake points at the fake's folder because it links it,
# and spark's dlopen("libcuda.so.1") then returns the object already loaded.  The folder is tests/fake_cuda/ of the build tree, which no
# other binary's RPATH names (only the folders of what each links), so every other test and
# tool still loads the real driver.
add_library(spark_fake_cuda SHARED ${CMAKE_CURRENT_LIST_DIR}/fake_cuda.cpp)
set_target_properties(spark_fake_cuda PROPERTIES
  OUTPUT_NAME cuda
  SOVERSION 1  # libcuda.so.1, soname libcuda.so.1
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fake_cuda
  CXX_VISIBILITY_PRESET hidden  # exports: the cu* entry points and fake_cuda_* only
  VISIBILITY_INLINES_HIDDEN ON)
target_include_directories(spark_fake_cuda PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(spark_fake_cuda PRIVATE Threads::Threads)

spark_test(test_driver_failures SOURCES runtime/test_driver_failures.cpp LABELS cpu LIBS spark_fake_cuda)
target_include_directories(test_driver_failures PRIVATE ${CMAKE_CURRENT_LIST_DIR})
# DT_RPATH, not DT_RUNPATH: searched before LD_LIBRARY_PATH, so the fake still wins where
# LD_LIBRARY_PATH names the real driver's folder (as GPU containers often do).
target_link_options(test_driver_failures PRIVATE LINKER:--disable-new-dtags)
# The value up-projection's cases again on its other tilings: the stationary schedule past
# decode, and SPARK_OPROJ_TILES tables (one of four regimes, a one-team wg one at decode and
# a two-team one past M = 32 among them; one with three ring regimes, the last of two 16-row
# tiles a unit).
add_test(NAME test_driver_failures_oproj_stationary COMMAND test_driver_failures -tc=oproj*)
set_tests_properties(test_driver_failures_oproj_stationary PROPERTIES LABELS cpu
                     ENVIRONMENT "SPARK_LOG_LEVEL=error;SPARK_OPROJ_SCHEDULE=stationary")
add_test(NAME test_driver_failures_oproj_tiles COMMAND test_driver_failures -tc=oproj*)
set_tests_properties(test_driver_failures_oproj_tiles PROPERTIES LABELS cpu
                     ENVIRONMENT "SPARK_LOG_LEVEL=error;SPARK_OPROJ_TILES=1-8:32x16x1,9-16:wg:10,17-32:64x4x2,33-8192:wg:5x2")
add_test(NAME test_driver_failures_oproj_ring COMMAND test_driver_failures -tc=oproj*)
set_tests_properties(test_driver_failures_oproj_ring PROPERTIES LABELS cpu
                     ENVIRONMENT "SPARK_LOG_LEVEL=error;SPARK_OPROJ_TILES=1-8:ring:32x4x3,9-16:ring:32x8x2,17-32:ring:32x4x2,33-8192:64x4x2")

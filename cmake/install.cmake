# cmake --install: the header, libspark.so.0 (SONAME) with its development link, the tools, a
# CMake package (find_package(spark) -> spark::spark) and a pkg-config file (spark.pc).
include(CMakePackageConfigHelpers)

set(SPARK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/spark)

install(TARGETS spark EXPORT sparkTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT development
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/spark/spark.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/spark COMPONENT development)
foreach(tool spark-prewarm spark-cache spark-bench)
  if(TARGET ${tool})
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
  endif()
endforeach()

install(EXPORT sparkTargets NAMESPACE spark:: DESTINATION ${SPARK_CMAKE_DIR} COMPONENT development)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/sparkConfig.cmake.in
  ${PROJECT_BINARY_DIR}/sparkConfig.cmake INSTALL_DESTINATION ${SPARK_CMAKE_DIR})
# 0.x: a minor release may change the C API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/sparkConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/sparkConfig.cmake ${PROJECT_BINARY_DIR}/sparkConfigVersion.cmake
  DESTINATION ${SPARK_CMAKE_DIR} COMPONENT development)

# pkg-config paths relative to the .pc file, so the installed tree can be moved.
configure_file(${CMAKE_CURRENT_LIST_DIR}/spark.pc.in ${PROJECT_BINARY_DIR}/spark.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/spark.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT development)

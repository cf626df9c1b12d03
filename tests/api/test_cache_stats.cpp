// spark_context_cache_stats: its argument rules, on any machine.  The counters of a real
// context are checked on a GPU (tests/gpu/test_cache_stats.cpp); the counting itself is
// tested through KernelStore.
#include <doctest/doctest.h>

#include <string>

#include "spark/spark.h"

TEST_CASE("spark_context_cache_stats rejects NULL and short structs, naming the argument") {
  spark_cache_stats stats{};
  stats.struct_size = sizeof stats;
  CHECK(spark_context_cache_stats(nullptr, nullptr) == SPARK_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(spark_last_error()).find("'out'") != std::string::npos);

  spark_cache_stats short_struct{};
  short_struct.struct_size = sizeof(size_t);
  CHECK(spark_context_cache_stats(nullptr, &short_struct) == SPARK_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(spark_last_error()).find("'struct_size'") != std::string::npos);

  CHECK(spark_context_cache_stats(nullptr, &stats) == SPARK_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(spark_last_error()).find("'ctx'") != std::string::npos);
  CHECK(stats.hits == 0);  // untouched on failure
}

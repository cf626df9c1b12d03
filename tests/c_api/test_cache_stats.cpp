// spark_context_cache_stats: argument rules on any machine; the counters of a real
// context where there is a GPU (the counting itself is tested through KernelStore).
#include <doctest/doctest.h>

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
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

TEST_CASE("a context counts its compiles, hits and load time (GPU only)") {
  spark_context ctx = nullptr;
  if (spark_context_create(nullptr, &ctx) != SPARK_SUCCESS) {
    MESSAGE("no CUDA device: counting through a context is not checked here (" << std::string(spark_last_error()) << ")");
    return;
  }
  char tmpl[] = "/tmp/spark-capi-stats-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  spark_context_destroy(ctx);
  ::setenv("SPARK_CACHE_DIR", dir.c_str(), 1);  // the context reads it when created
  REQUIRE(spark_context_create(nullptr, &ctx) == SPARK_SUCCESS);
  const spark_mla_qproj_desc desc = {sizeof desc, 8, 128, 512, 64, SPARK_WEIGHTS_BF16, SPARK_DTYPE_BF16};
  const spark_mla_qproj_plan_options opts = {sizeof opts, 16, 0, 0};
  spark_mla_qproj_plan plan = nullptr;
  REQUIRE(spark_mla_qproj_plan_create(ctx, &desc, &opts, &plan) == SPARK_SUCCESS);
  spark_cache_stats s{};
  s.struct_size = sizeof s;
  REQUIRE(spark_context_cache_stats(ctx, &s) == SPARK_SUCCESS);
  CHECK(s.compiles >= 1);  // every regime up to M = 16 on this device's arch, from an empty cache
  CHECK(s.misses == s.compiles);
  CHECK(s.hits == 0);
  CHECK(s.corrupt_entries == 0);
  CHECK(s.compile_ms > 0);
  CHECK(s.load_ms > 0);  // the module load onto the device
  spark_mla_qproj_plan_destroy(plan);
  spark_context_destroy(ctx);
  ::unsetenv("SPARK_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

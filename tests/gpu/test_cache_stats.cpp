// spark_context_cache_stats on a real context: a plan's compiles and module loads are
// counted.  Exits SPARK_SKIP_CODE (ctest: skipped) where there is no CUDA device.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "spark/spark.h"

TEST_CASE("a context counts its compiles, hits and load time") {
  spark_context ctx = nullptr;
  REQUIRE(spark_context_create(nullptr, &ctx) == SPARK_SUCCESS);
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

int main(int argc, char** argv) {
  spark_context ctx = nullptr;
  if (spark_context_create(nullptr, &ctx) != SPARK_SUCCESS) {
    std::printf("SKIPPED: no CUDA device (%s)\n", spark_last_error());
    return SPARK_SKIP_CODE;
  }
  spark_context_destroy(ctx);
  doctest::Context run(argc, argv);
  return run.run();
}

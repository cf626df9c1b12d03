// A C++ program built against spark through CMake (find_package or add_subdirectory).
#include <spark/spark.h>

#include <cstdio>
#include <string>

int main() {
  spark_mla_qproj_desc desc = SPARK_MLA_QPROJ_DESC_INIT;
  desc.heads = 8;
  desc.nope_dim = 192;
  desc.latent_dim = 512;
  desc.rope_dim = 64;
  desc.weight_format = SPARK_WEIGHTS_MXFP8;
  const spark_status st = spark_mla_qproj_can_implement(&desc, nullptr);
  const std::string expected = std::to_string(SPARK_VERSION_MAJOR) + "." + std::to_string(SPARK_VERSION_MINOR) +
                               "." + std::to_string(SPARK_VERSION_PATCH);
  std::printf("spark %s, can_implement: %s\n", spark_version_string(), spark_status_string(st));
  return st == SPARK_SUCCESS && expected == spark_version_string() && spark_version_number() == SPARK_VERSION_NUMBER
             ? 0
             : 1;
}

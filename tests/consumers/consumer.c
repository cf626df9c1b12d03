/* A C99 program built against an installed spark through pkg-config. */
#include <spark/spark.h>

#include <stdio.h>
#include <string.h>

int main(void) {
  spark_mla_qproj_desc desc = SPARK_MLA_QPROJ_DESC_INIT;
  spark_status st;
  char expected[32];
  desc.heads = 16;
  desc.nope_dim = 128;
  desc.latent_dim = 512;
  desc.rope_dim = 64;
  st = spark_mla_qproj_can_implement(&desc, NULL);
  snprintf(expected, sizeof expected, "%d.%d.%d", SPARK_VERSION_MAJOR, SPARK_VERSION_MINOR, SPARK_VERSION_PATCH);
  printf("spark %s, can_implement: %s\n", spark_version_string(), spark_status_string(st));
  if (st != SPARK_SUCCESS || strcmp(spark_version_string(), expected) != 0) return 1;
  desc.latent_dim = 500; /* not a supported shape: refused with a message */
  st = spark_mla_qproj_can_implement(&desc, NULL);
  printf("latent_dim 500: %s: %s\n", spark_status_string(st), spark_last_error());
  return st == SPARK_ERROR_UNSUPPORTED || st == SPARK_ERROR_INVALID_ARGUMENT ? 0 : 1;
}

// The plan's launch geometry, without a GPU.
#include <doctest/doctest.h>

#include "ops/mla_qproj/plan.h"

TEST_CASE("a weight-stationary launch splits M only as far as the device needs") {
  // 132 SMs, one CTA each.  H = 128 (256 blocks) fills the device twice over: no split.
  CHECK(spark::stationary_m_chunks(256, 16, 132) == 1);
  // H = 8 (16 blocks) at M = 1024 (16 tiles): 8 chunks of 2 tiles use 128 SMs once.
  CHECK(spark::stationary_m_chunks(16, 16, 132) == 8);
  // Never more chunks than tiles, never an empty chunk.
  for (long long blocks : {1, 2, 16, 22, 64, 128, 256})
    for (long long tiles : {1, 2, 3, 7, 16, 128})
      for (long long resident : {1, 132, 264}) {
        const long long chunks = spark::stationary_m_chunks(blocks, tiles, resident);
        CAPTURE(blocks);
        CAPTURE(tiles);
        CHECK(chunks >= 1);
        CHECK(chunks <= tiles);
        const long long per = (tiles + chunks - 1) / chunks;
        CHECK((chunks - 1) * per < tiles);
      }
}

// The number conversions in templates/spark_device.cuh are host functions too: check
// them bit for bit against the reference, so the software e4m3 path (targets before
// sm_89) and the MXFP8 decode are right without a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "templates/spark_device.cuh"
#include "tests/support/reference.h"

namespace {
uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
}  // namespace

TEST_CASE("e4m3 decode matches the reference for all 256 codes") {
  for (int c = 0; c < 256; ++c) {
    CAPTURE(c);
    const float got = spark::e4m3_to_float(static_cast<uint8_t>(c));
    const float want = spark_test::e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      CHECK(std::isnan(got));
    } else {
      CHECK(bits(got) == bits(want));
    }
  }
}

TEST_CASE("e8m0 scale bytes are exponents, never numbers") {
  CHECK(spark::e8m0_to_float(127) == 1.0f);
  CHECK(spark::e8m0_to_float(128) == 2.0f);
  CHECK(spark::e8m0_to_float(126) == 0.5f);
  CHECK(spark::e8m0_to_float(1) == std::ldexp(1.0f, -126));
  CHECK(spark::e8m0_to_float(0) == std::ldexp(1.0f, -127));
  CHECK(spark::e8m0_to_float(254) == std::ldexp(1.0f, 127));
  CHECK(std::isnan(spark::e8m0_to_float(255)));
  for (int b = 0; b < 255; ++b)
    CHECK(bits(spark::e8m0_to_float(static_cast<uint8_t>(b))) ==
          (uint32_t(spark_test::e8m0_to_bf16(static_cast<uint8_t>(b))) << 16));
}

TEST_CASE("software float -> e4m3 (satfinite, RNE) matches the reference") {
  // Every e4m3 value, the midpoints between neighbours (ties), and a dense sweep.
  for (int c = 0; c < 256; ++c) {
    const float v = spark_test::e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isnan(v)) continue;
    CHECK(spark::float_to_e4m3_soft(v) == spark_test::float_to_e4m3_satfinite_rne(v));
    const float next = std::nextafter(v, v < 0 ? -1000.0f : 1000.0f);
    CHECK(spark::float_to_e4m3_soft(next) == spark_test::float_to_e4m3_satfinite_rne(next));
  }
  for (int c = 0; c < 0x7e; ++c) {
    const float lo = spark_test::e4m3_to_float(static_cast<uint8_t>(c));
    const float hi = spark_test::e4m3_to_float(static_cast<uint8_t>(c + 1));
    const float mid = (lo + hi) / 2;
    CAPTURE(mid);
    CHECK(spark::float_to_e4m3_soft(mid) == spark_test::float_to_e4m3_satfinite_rne(mid));
    CHECK(spark::float_to_e4m3_soft(-mid) == spark_test::float_to_e4m3_satfinite_rne(-mid));
  }
  // Every 2^-12 step of the float bit patterns from 0 up to past 448, and specials.
  for (uint32_t u = 0; u < 0x44000000u; u += 0x1000u) {
    float f;
    std::memcpy(&f, &u, 4);
    REQUIRE(spark::float_to_e4m3_soft(f) == spark_test::float_to_e4m3_satfinite_rne(f));
    REQUIRE(spark::float_to_e4m3_soft(-f) == spark_test::float_to_e4m3_satfinite_rne(-f));
  }
  for (float f : {INFINITY, -INFINITY, 1e30f, -1e30f, 448.0f, 464.0f, 465.0f, -0.0f})
    CHECK(spark::float_to_e4m3_soft(f) == spark_test::float_to_e4m3_satfinite_rne(f));
  CHECK((spark::float_to_e4m3_soft(NAN) & 0x7f) == 0x7f);
}

TEST_CASE("scale and clamp keeps NaN and saturates at 448") {
  CHECK(spark::scale_clamp_e4m3(1000.0f, 1.0f) == 448.0f);
  CHECK(spark::scale_clamp_e4m3(-1000.0f, 1.0f) == -448.0f);
  CHECK(std::isnan(spark::scale_clamp_e4m3(NAN, 2.0f)));
  CHECK(spark::scale_clamp_e4m3(3.0f, 0.5f) == 1.5f);
}

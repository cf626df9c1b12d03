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

TEST_CASE("MXFP8 pair rule: moved e4m3 bits times 2^(scale - 7) are the dequantised weight") {
  // The kernels' one-multiply path: both halves of e4m3x2_to_bf16x2_lowered are the code's
  // value times 2^-120, and one rounding of that times e8m0_to_bf16x2_raised's factor is
  // the rule's bf16, for every finite code and every scale byte the path takes.
  using spark_test::bf16_to_float;
  for (uint32_t scale = 0; scale <= spark::kMxPairScaleMax; ++scale) {
    const uint32_t factor = spark::e8m0_to_bf16x2_raised(scale, scale);
    CHECK((factor & 0xffffu) == factor >> 16);
    CHECK(bf16_to_float(static_cast<uint16_t>(factor)) == std::ldexp(1.0f, static_cast<int>(scale) - 7));
    for (int c = 0; c < 256; ++c) {
      if (spark_test::e4m3_is_nan(static_cast<uint8_t>(c))) continue;
      CAPTURE(scale);
      CAPTURE(c);
      // The code in the high byte of each half, the other bytes noise the rule ignores.
      const uint32_t v = 0x005a00a5u | uint32_t(c) << 8 | uint32_t(c ^ 0x80) << 24;
      const uint32_t moved = spark::e4m3x2_to_bf16x2_lowered(v);
      const float lo = bf16_to_float(static_cast<uint16_t>(moved)), hi = bf16_to_float(static_cast<uint16_t>(moved >> 16));
      CHECK(lo == std::ldexp(spark_test::e4m3_to_float(static_cast<uint8_t>(c)), -120));
      CHECK(std::signbit(lo) == ((c & 0x80) != 0));
      CHECK(std::signbit(hi) != std::signbit(lo));
      // The product of a <= 4-bit significand and a power of two is exact in float.
      const float product = lo * bf16_to_float(static_cast<uint16_t>(factor));
      CHECK(spark_test::float_to_bf16_rne(product) == spark_test::dequant_mxfp8(static_cast<uint8_t>(c), scale));
    }
  }
  CHECK(spark::e4m3x4_finite(0x7e7e7e7eu));
  CHECK(spark::e4m3x4_finite(0xfe00807eu));
  for (int byte = 0; byte < 4; ++byte) {
    const uint32_t others = 0x01020304u & ~(0xffu << (8 * byte));
    CHECK_FALSE(spark::e4m3x4_finite(others | 0x7fu << (8 * byte)));
    CHECK_FALSE(spark::e4m3x4_finite(others | 0xffu << (8 * byte)));
  }
}

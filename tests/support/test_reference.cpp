// CPU unit tests of the host reference helpers (tests/support/reference.h), against values
// computed by hand from the formats' definitions.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include "tests/support/reference.h"

using namespace spark_test;

namespace {

float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// bf16
// ---------------------------------------------------------------------------------------

TEST_CASE("bf16: exact values and decode") {
  CHECK(float_to_bf16_rne(1.0f) == 0x3F80);
  CHECK(float_to_bf16_rne(-2.0f) == 0xC000);
  CHECK(float_to_bf16_rne(0.0f) == 0x0000);
  CHECK(float_to_bf16_rne(-0.0f) == 0x8000);
  CHECK(float_to_bf16_rne(0x1p-127f) == 0x0040);  // subnormal
  CHECK(float_to_bf16_rne(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(float_to_bf16_rne(-std::numeric_limits<float>::infinity()) == 0xFF80);
  CHECK(bf16_to_float(0x3F80) == 1.0f);
  CHECK(bf16_to_float(0x4049) == 3.140625f);
  CHECK(bf16_to_float(0x0001) == 0x1p-133f);
  CHECK(bf16_to_float(0x7F7F) == 0x1.FEp127f);
  // Every non-NaN bf16 survives float and back.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t v = static_cast<uint16_t>(b);
    if (bf16_is_nan(v)) continue;
    REQUIRE(float_to_bf16_rne(bf16_to_float(v)) == v);
  }
}

TEST_CASE("bf16: round to nearest, ties to even") {
  // 1 + 2^-8 is half-way between 0x3F80 (even) and 0x3F81: to even.
  CHECK(float_to_bf16_rne(bits_float(0x3F808000u)) == 0x3F80);
  // Half-way between 0x3F81 (odd) and 0x3F82 (even): up.
  CHECK(float_to_bf16_rne(bits_float(0x3F818000u)) == 0x3F82);
  // Just above / below the half-way point.
  CHECK(float_to_bf16_rne(bits_float(0x3F808001u)) == 0x3F81);
  CHECK(float_to_bf16_rne(bits_float(0x3F817FFFu)) == 0x3F81);
  // Negative ties go by magnitude.
  CHECK(float_to_bf16_rne(bits_float(0xBF808000u)) == 0xBF80);
  CHECK(float_to_bf16_rne(bits_float(0xBF818000u)) == 0xBF82);
  // Carry across the exponent: 1.9921875 + half ulp (0x3FFF8000) -> 2.0 (0x4000).
  CHECK(float_to_bf16_rne(bits_float(0x3FFF8000u)) == 0x4000);
  // Overflow: the largest float rounds to +inf; the largest bf16 stays.
  CHECK(float_to_bf16_rne(std::numeric_limits<float>::max()) == 0x7F80);
  CHECK(float_to_bf16_rne(0x1.FEp127f) == 0x7F7F);
  // Subnormal ties: 2^-134 (half of the smallest bf16 subnormal) -> 0 (even); 3 * 2^-134 -> 2^-132.
  CHECK(float_to_bf16_rne(0x1p-134f) == 0x0000);
  CHECK(float_to_bf16_rne(0x3p-134f) == 0x0002);
  CHECK(float_to_bf16_rne(0x1p-133f) == 0x0001);
}

TEST_CASE("bf16: NaN stays NaN") {
  const uint16_t a = float_to_bf16_rne(bits_float(0x7FC00000u));
  CHECK(a == 0x7FC0);
  // A NaN with only low payload bits must not become inf.
  const uint16_t b = float_to_bf16_rne(bits_float(0x7F800001u));
  CHECK(bf16_is_nan(b));
  CHECK((b & 0x8000) == 0);
  const uint16_t c = float_to_bf16_rne(bits_float(0xFF800001u));
  CHECK(bf16_is_nan(c));
  CHECK((c & 0x8000) != 0);
  // A payload in the kept bits survives (and is quietened).
  CHECK(float_to_bf16_rne(bits_float(0x7FA00000u)) == 0x7FE0);
  CHECK(std::isnan(bf16_to_float(0x7FFF)));
  CHECK(bf16_is_nan(0x7FFF));
  CHECK_FALSE(bf16_is_nan(0x7F80));
}

// ---------------------------------------------------------------------------------------
// e4m3fn
// ---------------------------------------------------------------------------------------

TEST_CASE("e4m3: decode of hand-picked codes") {
  CHECK(e4m3_to_float(0x00) == 0.0f);
  CHECK(std::signbit(e4m3_to_float(0x80)));
  CHECK(e4m3_to_float(0x80) == 0.0f);
  CHECK(e4m3_to_float(0x01) == 0x1p-9f);       // smallest subnormal
  CHECK(e4m3_to_float(0x07) == 7.0f / 512.0f);  // largest subnormal
  CHECK(e4m3_to_float(0x08) == 0x1p-6f);       // smallest normal
  CHECK(e4m3_to_float(0x38) == 1.0f);
  CHECK(e4m3_to_float(0x39) == 1.125f);
  CHECK(e4m3_to_float(0x40) == 2.0f);
  CHECK(e4m3_to_float(0x5D) == 26.0f);
  CHECK(e4m3_to_float(0x77) == 240.0f);
  CHECK(e4m3_to_float(0x78) == 256.0f);
  CHECK(e4m3_to_float(0x7E) == 448.0f);
  CHECK(e4m3_to_float(0xFE) == -448.0f);
  CHECK(e4m3_to_float(0xB8) == -1.0f);
  CHECK(std::isnan(e4m3_to_float(0x7F)));
  CHECK(std::isnan(e4m3_to_float(0xFF)));
  CHECK(e4m3_is_nan(0x7F));
  CHECK(e4m3_is_nan(0xFF));
  CHECK_FALSE(e4m3_is_nan(0x7E));
  // 0x78 (exponent 15, mantissa 0) is finite in e4m3fn (no infinities).
  CHECK(std::isfinite(e4m3_to_float(0x78)));
}

TEST_CASE("e4m3: decode is strictly monotonic over the positive codes") {
  for (int c = 1; c <= 0x7E; ++c) {
    CAPTURE(c);
    REQUIRE(e4m3_to_float(static_cast<uint8_t>(c)) > e4m3_to_float(static_cast<uint8_t>(c - 1)));
    REQUIRE(e4m3_to_float(static_cast<uint8_t>(c | 0x80)) == -e4m3_to_float(static_cast<uint8_t>(c)));
  }
}

TEST_CASE("e4m3: every non-NaN code round-trips") {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    if (e4m3_is_nan(code)) continue;
    CAPTURE(c);
    REQUIRE(float_to_e4m3_satfinite_rne(e4m3_to_float(code)) == code);
  }
}

TEST_CASE("e4m3: saturation and NaN") {
  CHECK(float_to_e4m3_satfinite_rne(1000.0f) == 0x7E);
  CHECK(float_to_e4m3_satfinite_rne(-1e30f) == 0xFE);
  CHECK(float_to_e4m3_satfinite_rne(448.0f) == 0x7E);
  CHECK(float_to_e4m3_satfinite_rne(455.0f) == 0x7E);  // RNE -> 448 anyway
  CHECK(float_to_e4m3_satfinite_rne(464.0f) == 0x7E);  // RNE would give 480 (NaN code)
  CHECK(float_to_e4m3_satfinite_rne(479.0f) == 0x7E);
  CHECK(float_to_e4m3_satfinite_rne(-500.0f) == 0xFE);
  CHECK(float_to_e4m3_satfinite_rne(std::numeric_limits<float>::max()) == 0x7E);
  CHECK(float_to_e4m3_satfinite_rne(std::numeric_limits<float>::infinity()) == 0x7E);
  CHECK(float_to_e4m3_satfinite_rne(-std::numeric_limits<float>::infinity()) == 0xFE);
  CHECK(float_to_e4m3_satfinite_rne(std::numeric_limits<float>::quiet_NaN()) == 0x7F);
  CHECK(float_to_e4m3_satfinite_rne(-std::numeric_limits<float>::quiet_NaN()) == 0xFF);
  CHECK(float_to_e4m3_satfinite_rne(bits_float(0x7F800001u)) == 0x7F);
}

TEST_CASE("e4m3: round to nearest, ties to even") {
  // Between 1.0 (0x38, even) and 1.125 (0x39): the midpoint goes down to 0x38.
  CHECK(float_to_e4m3_satfinite_rne(1.0625f) == 0x38);
  CHECK(float_to_e4m3_satfinite_rne(std::nextafter(1.0625f, 2.0f)) == 0x39);
  CHECK(float_to_e4m3_satfinite_rne(std::nextafter(1.0625f, 0.0f)) == 0x38);
  // Between 1.125 (0x39, odd) and 1.25 (0x3A): the midpoint goes up to 0x3A.
  CHECK(float_to_e4m3_satfinite_rne(1.1875f) == 0x3A);
  CHECK(float_to_e4m3_satfinite_rne(-1.1875f) == 0xBA);
  // Between 1.875 (0x3F, odd) and 2.0 (0x40): up, carrying into the exponent.
  CHECK(float_to_e4m3_satfinite_rne(1.9375f) == 0x40);
  // Between 416 (0x7D, odd) and 448 (0x7E): up.
  CHECK(float_to_e4m3_satfinite_rne(432.0f) == 0x7E);
  // Between 384 (0x7C, even) and 416 (0x7D): down.
  CHECK(float_to_e4m3_satfinite_rne(400.0f) == 0x7C);
  // Between 26 (0x5D, odd mantissa) and 28 (0x5E): 26.9 is nearer 26; the midpoint 27
  // goes to the even one, 28.
  CHECK(float_to_e4m3_satfinite_rne(26.9f) == 0x5D);
  CHECK(float_to_e4m3_satfinite_rne(27.0f) == 0x5E);
}

TEST_CASE("e4m3: subnormals") {
  CHECK(float_to_e4m3_satfinite_rne(0x1p-9f) == 0x01);
  CHECK(float_to_e4m3_satfinite_rne(-0x1p-9f) == 0x81);
  CHECK(float_to_e4m3_satfinite_rne(0x1p-10f) == 0x00);   // tie between 0 and 2^-9: to 0 (even)
  CHECK(float_to_e4m3_satfinite_rne(-0x1p-10f) == 0x80);  // keeps the sign
  CHECK(float_to_e4m3_satfinite_rne(std::nextafter(0x1p-10f, 1.0f)) == 0x01);
  CHECK(float_to_e4m3_satfinite_rne(0x3p-10f) == 0x02);   // tie between 1 and 2 (x 2^-9): 2
  CHECK(float_to_e4m3_satfinite_rne(0x5p-10f) == 0x02);   // tie between 2 and 3: 2
  CHECK(float_to_e4m3_satfinite_rne(0.6f * 0x1p-9f) == 0x01);
  CHECK(float_to_e4m3_satfinite_rne(0x1p-12f) == 0x00);
  CHECK(float_to_e4m3_satfinite_rne(0x1p-140f) == 0x00);
  CHECK(float_to_e4m3_satfinite_rne(0x7p-9f) == 0x07);    // largest subnormal
  CHECK(float_to_e4m3_satfinite_rne(0xFp-10f) == 0x08);   // 7.5 x 2^-9: tie 7/8 -> 8 = 2^-6 (normal)
  CHECK(float_to_e4m3_satfinite_rne(0x1p-6f) == 0x08);
  CHECK(float_to_e4m3_satfinite_rne(0x11p-10f) == 0x08);  // 2^-6 + 2^-10: tie 0x08/0x09 -> 0x08
  CHECK(float_to_e4m3_satfinite_rne(0.0f) == 0x00);
  CHECK(float_to_e4m3_satfinite_rne(-0.0f) == 0x80);
}

TEST_CASE("e4m3: nearest-value sweep against the decode table") {
  // For a spread of floats, the code chosen is the nearest finite code (ties to an even
  // code) or saturates.
  std::vector<float> vals;
  for (int c = 0; c <= 0x7E; ++c) vals.push_back(e4m3_to_float(static_cast<uint8_t>(c)));
  for (int i = 0; i < 200000; ++i) {
    const float x = std::ldexp(static_cast<float>(i), -12) * 0.37f;  // 0 .. ~18
    const float y = x * 24.0f;                                        // up to ~444
    for (float v : {x, y}) {
      uint8_t best = 0;
      float best_d = std::numeric_limits<float>::infinity();
      for (int c = 0; c <= 0x7E; ++c) {
        const float d = std::fabs(vals[c] - v);
        if (d < best_d || (d == best_d && (c % 2) == 0)) {
          best_d = d;
          best = static_cast<uint8_t>(c);
        }
      }
      CAPTURE(v);
      REQUIRE(float_to_e4m3_satfinite_rne(v) == best);
    }
  }
}

// ---------------------------------------------------------------------------------------
// quantize_e4m3 (spark.h's e4m3 output rule)
// ---------------------------------------------------------------------------------------

TEST_CASE("quantize_e4m3: non-power-of-two scale") {
  const float s = 0.0371f;  // 1/s rounds to 26.9541798 (0x1.af4452p+4)
  CHECK(1.0f / s == 0x1.af4452p+4f);
  CHECK(quantize_e4m3(0x3F80, s) == 0x5D);  // 1.0 -> 26.95 -> 26
  CHECK(quantize_e4m3(0xBF80, s) == 0xDD);  // -1.0 -> -26
  CHECK(quantize_e4m3(0x3F00, s) == 0x55);  // 0.5 -> 13.48 -> 13
  CHECK(quantize_e4m3(float_to_bf16_rne(100.0f), s) == 0x7E);   // 2695 -> clamp 448
  CHECK(quantize_e4m3(float_to_bf16_rne(-100.0f), s) == 0xFE);
  CHECK(quantize_e4m3(0x7F80, s) == 0x7E);  // +inf -> clamp -> 448
  CHECK(quantize_e4m3(0xFF80, s) == 0xFE);
  CHECK(quantize_e4m3(0x7FC0, s) == 0x7F);  // NaN stays NaN
  CHECK(quantize_e4m3(0xFFC0, s) == 0xFF);
  CHECK(quantize_e4m3(0x0000, s) == 0x00);
  CHECK(quantize_e4m3(0x8000, s) == 0x80);
  // Scale 1: plain conversion.
  CHECK(quantize_e4m3(float_to_bf16_rne(1.0625f), 1.0f) == 0x38);
  CHECK(quantize_e4m3(float_to_bf16_rne(1.1875f), 1.0f) == 0x3A);
}

TEST_CASE("quantize_e4m3: multiplies by the rounded reciprocal, not a division") {
  // bf16 0x3B90 = 1.125 * 2^-8.  With s = 0.3f, 1/s rounds to 0x1.aaaaaap+1 and
  // x * (1/s) = 0x1.ep-7 = 7.5 * 2^-9 EXACTLY: a subnormal tie, to even -> code 0x08.
  // The correctly rounded quotient x / s is 0x1.dffffep-7, just below the tie -> 0x07.
  const float s = 0.3f;
  const uint16_t v = 0x3B90;
  CHECK(bf16_to_float(v) == 0x1.2p-8f);
  CHECK(1.0f / s == 0x1.aaaaaap+1f);
  CHECK(bf16_to_float(v) * (1.0f / s) == 0x1.ep-7f);
  CHECK(bf16_to_float(v) / s == 0x1.dffffep-7f);
  CHECK(quantize_e4m3(v, s) == 0x08);
  CHECK(float_to_e4m3_satfinite_rne(bf16_to_float(v) / s) == 0x07);
  CHECK(quantize_e4m3(static_cast<uint16_t>(v | 0x8000), s) == 0x88);
}

TEST_CASE("quantize_e4m3: agrees with convert(x * inv) over all bf16 values") {
  for (float s : {0.0371f, 0.00713f, 1.0f, 3.7f}) {
    const float inv = 1.0f / s;
    for (uint32_t b = 0; b < 0x10000; ++b) {
      const uint16_t v = static_cast<uint16_t>(b);
      if (bf16_is_nan(v)) continue;
      const float x = bf16_to_float(v) * inv;
      const uint8_t q = quantize_e4m3(v, s);
      CAPTURE(s);
      CAPTURE(b);
      if (std::fabs(x) >= 448.0f) {
        REQUIRE(q == (std::signbit(x) ? 0xFE : 0x7E));
      } else {
        REQUIRE(q == float_to_e4m3_satfinite_rne(x));
        // Within half a quantum of x.
        const float d = std::fabs(e4m3_to_float(q) - x);
        const float quantum = std::fabs(x) < 0x1p-6f ? 0x1p-9f
                                                    : std::ldexp(1.0f, std::ilogb(x) - 3);
        REQUIRE(d <= quantum * 0.5f);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// e8m0 / MXFP8
// ---------------------------------------------------------------------------------------

TEST_CASE("e8m0 scale bytes") {
  CHECK(e8m0_to_bf16(0) == 0x0040);  // 2^-127, subnormal
  CHECK(bf16_to_float(e8m0_to_bf16(0)) == 0x1p-127f);
  CHECK(e8m0_to_bf16(1) == 0x0080);  // 2^-126
  CHECK(e8m0_to_bf16(127) == 0x3F80);
  CHECK(e8m0_to_bf16(128) == 0x4000);
  CHECK(e8m0_to_bf16(254) == 0x7F00);  // 2^127
  CHECK(bf16_is_nan(e8m0_to_bf16(255)));
  for (int b = 0; b < 255; ++b) {
    CAPTURE(b);
    REQUIRE(bf16_to_float(e8m0_to_bf16(static_cast<uint8_t>(b))) == std::ldexp(1.0f, b - 127));
  }
}

TEST_CASE("dequant_mxfp8: hand-computed values") {
  // Scale byte 127 is 1.0: the e4m3 value itself.
  CHECK(dequant_mxfp8(0x38, 127) == 0x3F80);
  CHECK(dequant_mxfp8(0x7E, 127) == 0x43E0);  // 448
  CHECK(dequant_mxfp8(0x01, 127) == 0x3B00);  // 2^-9
  CHECK(dequant_mxfp8(0xB5, 127) == 0xBF50);  // -0.8125
  CHECK(dequant_mxfp8(0x00, 127) == 0x0000);
  CHECK(dequant_mxfp8(0x80, 127) == 0x8000);

  // Byte 0: 2^-127.
  CHECK(dequant_mxfp8(0x38, 0) == 0x0040);  // 1.0 * 2^-127 = bf16 subnormal
  CHECK(dequant_mxfp8(0x7E, 0) == 0x0460);  // 1.75 * 2^-119: biased exponent 8, mantissa 0x60
  CHECK(dequant_mxfp8(0x01, 0) == 0x0000);  // 2^-136: below half the smallest bf16 subnormal
  CHECK(dequant_mxfp8(0x81, 0) == 0x8000);
  CHECK(dequant_mxfp8(0x09, 0) == 0x0001);  // 1.125 * 2^-133 -> 1 (x 2^-133)
  CHECK(dequant_mxfp8(0x0A, 0) == 0x0001);  // 1.25  * 2^-133 -> 1
  CHECK(dequant_mxfp8(0x0C, 0) == 0x0002);  // 1.5   * 2^-133: tie 1/2 -> 2 (even)
  CHECK(dequant_mxfp8(0x0E, 0) == 0x0002);  // 1.75  * 2^-133 -> 2
  CHECK(dequant_mxfp8(0x14, 0) == 0x0003);  // 1.5 * 2^-5 * 2^-127 = 3 * 2^-133 exactly
  CHECK(dequant_mxfp8(0x15, 0) == 0x0003);  // 1.625 * 2^-132 = 3.25 * 2^-133 -> 3
  CHECK(dequant_mxfp8(0x17, 0) == 0x0004);  // 1.875 * 2^-132 = 3.75 -> 4
  CHECK(dequant_mxfp8(0x0D, 0) == 0x0002);  // 1.625 * 2^-133 -> 2
  CHECK(dequant_mxfp8(0x1D, 0) == 0x0006);  // 1.625 * 2^-131 = 6.5 * 2^-133: tie 6/7 -> 6

  // Byte 1: 2^-126 (the smallest normal).
  CHECK(dequant_mxfp8(0x38, 1) == 0x0080);
  CHECK(dequant_mxfp8(0x7E, 1) == 0x04E0);  // 1.75 * 2^-118
  CHECK(dequant_mxfp8(0x30, 1) == 0x0040);  // 0.5 * 2^-126 = 2^-127

  // Byte 254: 2^127.
  CHECK(dequant_mxfp8(0x38, 254) == 0x7F00);
  CHECK(dequant_mxfp8(0x30, 254) == 0x7E80);  // 2^126
  CHECK(dequant_mxfp8(0x40, 254) == 0x7F80);  // 2^128 overflows float: +inf
  CHECK(dequant_mxfp8(0xC0, 254) == 0xFF80);
  CHECK(dequant_mxfp8(0x7E, 254) == 0x7F80);  // 448 * 2^127: +inf
  CHECK(dequant_mxfp8(0x3F, 254) == 0x7F70);  // 1.875 * 2^127 = 0x7F70 (finite)

  // Byte 255: NaN whatever the value.
  for (uint8_t c : {0x00, 0x38, 0x7E, 0xB8}) {
    CAPTURE(c);
    CHECK(bf16_is_nan(dequant_mxfp8(c, 255)));
  }
  // NaN e4m3 codes give NaN.
  CHECK(bf16_is_nan(dequant_mxfp8(0x7F, 127)));
  CHECK(bf16_is_nan(dequant_mxfp8(0xFF, 0)));

  // Bytes 118..132: 2^-9 .. 2^5, all normal results.
  for (int b = 118; b <= 132; ++b) {
    CAPTURE(b);
    const uint8_t byte = static_cast<uint8_t>(b);
    // 1.0 * 2^(b-127): biased exponent b, mantissa 0.
    CHECK(dequant_mxfp8(0x38, byte) == static_cast<uint16_t>(b << 7));
    // 448 = 1.75 * 2^8: biased exponent b + 8, mantissa 0x60.
    CHECK(dequant_mxfp8(0x7E, byte) == static_cast<uint16_t>(((b + 8) << 7) | 0x60));
    // 2^-9 (smallest e4m3 subnormal): biased exponent b - 9.
    CHECK(dequant_mxfp8(0x01, byte) == static_cast<uint16_t>((b - 9) << 7));
    // -0.8125 = -1.625 * 2^-1: sign, biased exponent b - 1, mantissa 0x50.
    CHECK(dequant_mxfp8(0xB5, byte) == static_cast<uint16_t>(0x8000 | ((b - 1) << 7) | 0x50));
    // 3 * 2^-9 (subnormal 0x03) = 1.5 * 2^-8: biased exponent b - 8, mantissa 0x40.
    CHECK(dequant_mxfp8(0x03, byte) == static_cast<uint16_t>(((b - 8) << 7) | 0x40));
    // Zero stays zero.
    CHECK(dequant_mxfp8(0x00, byte) == 0x0000);
  }
  // A few literal spot values.
  CHECK(dequant_mxfp8(0x38, 118) == 0x3B00);  // 2^-9
  CHECK(dequant_mxfp8(0x38, 132) == 0x4200);  // 32
  CHECK(dequant_mxfp8(0x7E, 132) == 0x4660);  // 448 * 32 = 14336
  CHECK(bf16_to_float(dequant_mxfp8(0x7E, 132)) == 14336.0f);
  CHECK(bf16_to_float(dequant_mxfp8(0xB5, 120)) == -0.8125f / 128.0f);
}

TEST_CASE("dequant_mxfp8: equals the rule for every code and byte") {
  for (int b = 0; b < 255; ++b) {
    for (int c = 0; c < 256; ++c) {
      const uint8_t code = static_cast<uint8_t>(c);
      if (e4m3_is_nan(code)) continue;
      // In double: exact product, then one rounding to bf16 (double -> float is exact
      // here unless it is below float's subnormal range, which it never is).
      const double p = static_cast<double>(e4m3_to_float(code)) * std::ldexp(1.0, b - 127);
      const uint16_t want = std::fabs(p) > static_cast<double>(std::numeric_limits<float>::max())
                                ? static_cast<uint16_t>(p < 0 ? 0xFF80 : 0x7F80)  // float overflow
                                : float_to_bf16_rne(static_cast<float>(p));
      CAPTURE(b);
      CAPTURE(c);
      REQUIRE(dequant_mxfp8(code, static_cast<uint8_t>(b)) == want);
    }
  }
}

// ---------------------------------------------------------------------------------------
// reference_mla_qproj, random fills, parallel_for
// ---------------------------------------------------------------------------------------

TEST_CASE("reference_mla_qproj: small hand-computed case with strides") {
  // H = 2, M = 2, K = 3, N = 4; q_nope in a token-major [M, H, K+R] buffer (R = 1),
  // w pitched: w_stride_k = 5, w_stride_h = 16 (4 rows of 5, one spare row).
  const int H = 2, M = 2, K = 3, N = 4, KR = 4;
  std::vector<uint16_t> q(static_cast<size_t>(M) * H * KR, 0x7FC0);  // NaN where unused
  auto Q = [&](int h, int m, int k) -> uint16_t& { return q[static_cast<size_t>(m) * H * KR + h * KR + k]; };
  std::vector<uint16_t> w(2 * 16, 0x7FC0);
  auto W = [&](int h, int k, int n) -> uint16_t& { return w[static_cast<size_t>(h) * 16 + k * 5 + n]; };
  for (int h = 0; h < H; ++h)
    for (int m = 0; m < M; ++m)
      for (int k = 0; k < K; ++k) Q(h, m, k) = float_to_bf16_rne(static_cast<float>(1 + k + 3 * m + 10 * h));
  for (int h = 0; h < H; ++h)
    for (int k = 0; k < K; ++k)
      for (int n = 0; n < N; ++n) W(h, k, n) = float_to_bf16_rne(static_cast<float>((n + 1) * (k == h ? 1 : 2)) * 0.5f);
  std::vector<double> out(static_cast<size_t>(M) * H * N, -1.0);
  for (unsigned threads : {1u, 2u, 7u}) {
    reference_mla_qproj(H, M, K, N, q.data(), KR, H * KR, w.data(), 16, 5, out.data(), threads);
    for (int m = 0; m < M; ++m)
      for (int h = 0; h < H; ++h)
        for (int n = 0; n < N; ++n) {
          double want = 0;
          for (int k = 0; k < K; ++k)
            want += (1.0 + k + 3 * m + 10 * h) * ((n + 1) * (k == h ? 1 : 2) * 0.5);
          CAPTURE(threads);
          CAPTURE(m);
          CAPTURE(h);
          CAPTURE(n);
          REQUIRE(out[(static_cast<size_t>(m) * H + h) * N + n] == want);
        }
  }
  // Spot value: m=1, h=0, n=3: q = 4,5,6; w = 2, 4, 4 -> 8 + 20 + 24 = 52.
  CHECK(out[(1 * H + 0) * N + 3] == 52.0);
}

TEST_CASE("reference_mla_qproj: random, any thread count gives the same doubles") {
  const int H = 5, M = 37, K = 24, N = 40;
  std::vector<uint16_t> q(static_cast<size_t>(M) * H * (K + 8));
  std::vector<uint16_t> w(static_cast<size_t>(H) * (K + 2) * (N + 8));
  const uint64_t seed = next_seed();
  INFO("seed " << seed);
  fill_bf16_random(q.data(), q.size(), seed);
  fill_bf16_random(w.data(), w.size(), seed + 1);
  std::vector<double> a(static_cast<size_t>(M) * H * N), b(a.size());
  reference_mla_qproj(H, M, K, N, q.data(), K + 8, H * (K + 8), w.data(), (K + 2) * (N + 8), N + 8, a.data(), 1);
  reference_mla_qproj(H, M, K, N, q.data(), K + 8, H * (K + 8), w.data(), (K + 2) * (N + 8), N + 8, b.data(), 0);
  CHECK(a == b);
  // Naive triple loop.
  for (int m = 0; m < M; ++m)
    for (int h = 0; h < H; ++h)
      for (int n = 0; n < N; ++n) {
        double s = 0;
        for (int k = 0; k < K; ++k)
          s += static_cast<double>(bf16_to_float(q[static_cast<size_t>(m) * H * (K + 8) + h * (K + 8) + k])) *
               static_cast<double>(bf16_to_float(w[static_cast<size_t>(h) * (K + 2) * (N + 8) + k * (N + 8) + n]));
        // Products of bf16 values are exact in double; sums of 24 of them with |x| < ~12
        // differ only by reassociation.
        REQUIRE(std::fabs(s - a[(static_cast<size_t>(m) * H + h) * N + n]) <= 1e-12 * (1 + std::fabs(s)));
      }
}

TEST_CASE("reference_mla_oproj: random strided views, against a naive loop, any thread count") {
  // o token-major with a padded row (o_stride_h L + 8, o_stride_m H * (L + 8) + 16); W_UV
  // the last V rows of each head of a pack with 3 extra rows per head and a pitch of L + 8.
  const int H = 3, M = 29, L = 40, V = 24;
  const int64_t o_sh = L + 8, o_sm = H * o_sh + 16, w_sv = L + 8, w_sh = (V + 3) * w_sv;
  std::vector<uint16_t> o(static_cast<size_t>(M) * o_sm), pack(static_cast<size_t>(H) * w_sh);
  const uint64_t seed = next_seed();
  INFO("seed " << seed);
  fill_bf16_random(o.data(), o.size(), seed);
  fill_bf16_random(pack.data(), pack.size(), seed + 1);
  const uint16_t* w = pack.data() + 3 * w_sv;
  std::vector<double> a(static_cast<size_t>(M) * H * V), b(a.size(), -1.0);
  reference_mla_oproj(H, M, L, V, o.data(), o_sm, o_sh, w, w_sh, w_sv, a.data(), 1);
  reference_mla_oproj(H, M, L, V, o.data(), o_sm, o_sh, w, w_sh, w_sv, b.data(), 0);
  CHECK(a == b);
  for (int m = 0; m < M; ++m)
    for (int h = 0; h < H; ++h)
      for (int v = 0; v < V; ++v) {
        double s = 0;
        for (int l = 0; l < L; ++l)
          s += static_cast<double>(bf16_to_float(o[static_cast<size_t>(m * o_sm + h * o_sh + l)])) *
               static_cast<double>(bf16_to_float(w[h * w_sh + v * w_sv + l]));
        CAPTURE(m);
        CAPTURE(h);
        CAPTURE(v);
        REQUIRE(std::fabs(s - a[(static_cast<size_t>(m) * H + h) * V + v]) <= 1e-12 * (1 + std::fabs(s)));
      }
  // One hand-computed element: o(0, 1, :) = 1, 2, 0, ...; w(1, :, 2) = 3, -1, 0, ... -> 3 - 2 = 1.
  std::fill(o.begin(), o.begin() + o_sm, 0);
  o[o_sh + 0] = float_to_bf16_rne(1.0f);
  o[o_sh + 1] = float_to_bf16_rne(2.0f);
  std::vector<uint16_t> w2(pack.size(), 0);
  const int64_t base = 3 * w_sv + 1 * w_sh + 2 * w_sv;  // view + (h = 1, v = 2)
  w2[static_cast<size_t>(base)] = float_to_bf16_rne(3.0f);
  w2[static_cast<size_t>(base + 1)] = float_to_bf16_rne(-1.0f);
  reference_mla_oproj(H, 1, L, V, o.data(), o_sm, o_sh, w2.data() + 3 * w_sv, w_sh, w_sv, a.data(), 3);
  CHECK(a[1 * V + 2] == 1.0);
  CHECK(a[1 * V + 3] == 0.0);
}

TEST_CASE("fill_bf16_random: deterministic, never zero, normal-ish") {
  const size_t n = 1 << 20;
  std::vector<uint16_t> a(n), b(n), c(n);
  fill_bf16_random(a.data(), n, 42);
  fill_bf16_random(b.data(), n, 42);
  fill_bf16_random(c.data(), n, 43);
  CHECK(a == b);
  CHECK(a != c);
  double sum = 0, sum2 = 0;
  size_t zeros = 0, nonfinite = 0;
  for (uint16_t v : a) {
    if ((v & 0x7FFF) == 0) ++zeros;
    const float f = bf16_to_float(v);
    if (!std::isfinite(f)) ++nonfinite;
    sum += f;
    sum2 += static_cast<double>(f) * f;
  }
  CHECK(zeros == 0);
  CHECK(nonfinite == 0);
  const double mean = sum / n, var = sum2 / n - mean * mean;
  CHECK(std::fabs(mean) < 0.01);
  CHECK(var > 0.95);
  CHECK(var < 1.05);
  // Scaled.
  fill_bf16_random(c.data(), n, 7, 0.125f);
  double m2 = 0;
  for (uint16_t v : c) m2 += static_cast<double>(bf16_to_float(v)) * bf16_to_float(v);
  CHECK(std::sqrt(m2 / n) == doctest::Approx(0.125).epsilon(0.02));
  // A prefix of a longer fill is the shorter fill (independent of the thread split).
  std::vector<uint16_t> d(1000);
  fill_bf16_random(d.data(), d.size(), 42);
  CHECK(std::equal(d.begin(), d.end(), a.begin()));
}

TEST_CASE("seeds") {
  const uint64_t s1 = next_seed(), s2 = next_seed();
  CHECK(s1 != s2);
  CHECK(base_seed() == base_seed());
  Rng r(s1), r2(s1);
  CHECK(r.next_u64() == r2.next_u64());
  const double u = r.uniform(2.0, 3.0);
  CHECK(u >= 2.0);
  CHECK(u < 3.0);
  CHECK(std::isfinite(r.normal()));
  CHECK(r.seed() == s1);
}

TEST_CASE("parallel_for covers every index once") {
  for (size_t n : {size_t(0), size_t(1), size_t(4095), size_t(4097), size_t(100000)}) {
    std::vector<int> hits(n, 0);
    parallel_for(n, [&](size_t b, size_t e, unsigned) {
      for (size_t i = b; i < e; ++i) hits[i] += 1;
    });
    CAPTURE(n);
    CHECK(std::count(hits.begin(), hits.end(), 1) == static_cast<std::ptrdiff_t>(n));
  }
}

TEST_CASE("block FP8: the fp32 product, rounded once to bf16") {
  CHECK(dequant_fp8_block(0x38, 0.1f) == float_to_bf16_rne(0.1f));  // 1.0 x 0.1
  CHECK(dequant_fp8_block(0x00, 3.0f) == 0x0000);
  CHECK(dequant_fp8_block(0x80, 3.0f) == 0x8000);                    // -0 stays -0
  CHECK(dequant_fp8_block(0xFE, 2.0f) == float_to_bf16_rne(-896.0f));
  // Against the product computed exactly in double (4 x 24 significant bits fit in 53) and
  // rounded to float, then to bf16: the same two roundings, another route.
  uint64_t state = 0x5EEDull;
  for (int i = 0; i < 200000; ++i) {
    state = mix64(state + 1);
    const uint8_t code = static_cast<uint8_t>(state & 0xFF);
    if (e4m3_is_nan(code)) continue;
    const float scale = std::ldexp(1.0f + static_cast<float>((state >> 8) & 0x7FFFFF) * 0x1p-23f,
                                   static_cast<int>((state >> 40) % 40) - 30);
    const float product = static_cast<float>(static_cast<double>(e4m3_to_float(code)) * static_cast<double>(scale));
    REQUIRE(dequant_fp8_block(code, scale) == float_to_bf16_rne(product));
  }
}

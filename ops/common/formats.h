// What every op's key shares: the weight formats and output dtypes (the C API's enums as
// the keys hold them), M regimes, and the strict readers of a key name's fields.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "spark/spark.h"

namespace spark {

// The C API's formats (their values are the C enums').
enum class WeightFormat : int32_t {
  kBf16 = SPARK_WEIGHTS_BF16,
  kMxfp8 = SPARK_WEIGHTS_MXFP8,
  kFp8Block128 = SPARK_WEIGHTS_FP8_BLOCK128,
};
// Every weight format, in the C enum's order.
inline constexpr WeightFormat kWeightFormats[] = {WeightFormat::kBf16, WeightFormat::kMxfp8,
                                                  WeightFormat::kFp8Block128};
// Whether the weights are 8-bit e4m3 values with scales (MXFP8 or block FP8).
constexpr bool is_fp8(WeightFormat f) { return f != WeightFormat::kBf16; }
enum class OutDtype : int32_t { kBf16 = SPARK_DTYPE_BF16, kE4m3 = SPARK_DTYPE_E4M3 };

std::string_view to_string(WeightFormat f);
std::string_view to_string(OutDtype d);
WeightFormat parse_weight_format(std::string_view s);  // "bf16" | "mxfp8" | "fp8-block"
OutDtype parse_out_dtype(std::string_view s);          // "bf16" | "e4m3"

// An inclusive range of M served by one kernel.
struct MRegime {
  int m_min = 1;
  int m_max = 1;
  bool contains(int m) const { return m >= m_min && m <= m_max; }
  bool operator==(const MRegime& o) const { return m_min == o.m_min && m_max == o.m_max; }
};

// ---- Reading key names back (each op's KernelKey::parse) --------------------------------

// `text` for a message: control and non-ASCII bytes as \xNN (a name read from a directory
// listing or an archive must not reach a terminal as escape sequences), cut at 200 bytes.
std::string printable(std::string_view text);
std::vector<std::string_view> split(std::string_view s, char sep);
// A number exactly as a key prints it: decimal digits without sign or leading zero, in
// lo..hi (lo >= 1).  Throws INVALID_ARGUMENT naming the field of the key `whole`.
int parse_key_number(std::string_view text, int lo, int hi, std::string_view field, std::string_view whole);
// "<prefix><number>".
int parse_key_prefixed(std::string_view part, char prefix, int lo, int hi, std::string_view field,
                       std::string_view whole);
// "mLO-HI" within 1..max_m.
MRegime parse_key_regime(std::string_view part, int max_m, std::string_view whole);
// "w<format>", "o<dtype>", and an arch as core/key_name.h states it.
WeightFormat parse_key_weights(std::string_view part, std::string_view whole);
OutDtype parse_key_out(std::string_view part, std::string_view whole);
std::string parse_key_arch(std::string_view part, std::string_view whole);

}  // namespace spark

#include "ops/common/formats.h"

#include <charconv>

#include "core/error.h"
#include "core/key_name.h"

namespace spark {

std::string_view to_string(WeightFormat f) {
  switch (f) {
    case WeightFormat::kBf16: return "bf16";
    case WeightFormat::kMxfp8: return "mxfp8";
    case WeightFormat::kFp8Block128: return "fp8-block";
  }
  return "?";
}
std::string_view to_string(OutDtype d) { return d == OutDtype::kBf16 ? "bf16" : "e4m3"; }

std::string printable(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, 200)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\')
      out += c;
    else
      out += fmt::format("\\x{:02x}", u);
  }
  if (text.size() > 200) out += "...";
  return out;
}

WeightFormat parse_weight_format(std::string_view s) {
  if (s == "bf16") return WeightFormat::kBf16;
  if (s == "mxfp8") return WeightFormat::kMxfp8;
  if (s == "fp8-block") return WeightFormat::kFp8Block128;
  SPARK_FAIL(SPARK_ERROR_INVALID_ARGUMENT, "weight format '{}' is not one of bf16, mxfp8, fp8-block", printable(s));
}

OutDtype parse_out_dtype(std::string_view s) {
  if (s == "bf16") return OutDtype::kBf16;
  if (s == "e4m3") return OutDtype::kE4m3;
  SPARK_FAIL(SPARK_ERROR_INVALID_ARGUMENT, "output dtype '{}' is not one of bf16, e4m3", printable(s));
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(sep, start);
    parts.push_back(s.substr(start, at - start));
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return parts;
}

int parse_key_number(std::string_view text, int lo, int hi, std::string_view field, std::string_view whole) {
  const bool digits = !text.empty() && text.size() <= 10 && text[0] != '0' &&
                      text.find_first_not_of("0123456789") == std::string_view::npos;
  int v = 0;
  const bool parsed =
      digits && std::from_chars(text.data(), text.data() + text.size(), v).ec == std::errc() && v >= lo && v <= hi;
  SPARK_CHECK(parsed, SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': field {} '{}' is not a number in {}..{} (decimal, no sign or leading zero)",
              printable(whole), field, printable(text), lo, hi);
  return v;
}

int parse_key_prefixed(std::string_view part, char prefix, int lo, int hi, std::string_view field,
                       std::string_view whole) {
  SPARK_CHECK(!part.empty() && part[0] == prefix, SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': expected {} as '{}<number>', got '{}'", printable(whole), field, prefix,
              printable(part));
  return parse_key_number(part.substr(1), lo, hi, field, whole);
}

MRegime parse_key_regime(std::string_view m, int max_m, std::string_view whole) {
  const size_t dash = m.find('-');
  SPARK_CHECK(!m.empty() && m[0] == 'm' && dash != std::string_view::npos, SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': expected the M regime as 'mLO-HI', got '{}'", printable(whole), printable(m));
  MRegime regime;
  regime.m_min = parse_key_number(m.substr(1, dash - 1), 1, max_m, "m_min", whole);
  regime.m_max = parse_key_number(m.substr(dash + 1), 1, max_m, "m_max", whole);
  SPARK_CHECK(regime.m_min <= regime.m_max, SPARK_ERROR_INVALID_ARGUMENT, "kernel key '{}': empty M regime '{}'",
              printable(whole), printable(m));
  return regime;
}

WeightFormat parse_key_weights(std::string_view part, std::string_view whole) {
  SPARK_CHECK(part.size() > 1 && part[0] == 'w', SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': expected the weight format as 'w<fmt>', got '{}'", printable(whole),
              printable(part));
  return parse_weight_format(part.substr(1));
}

OutDtype parse_key_out(std::string_view part, std::string_view whole) {
  SPARK_CHECK(part.size() > 1 && part[0] == 'o', SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': expected the output dtype as 'o<dtype>', got '{}'", printable(whole),
              printable(part));
  return parse_out_dtype(part.substr(1));
}

std::string parse_key_arch(std::string_view part, std::string_view whole) {
  SPARK_CHECK(is_arch_name(part), SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': expected an arch like sm_90a ('sm_', 2-3 digits, an optional lowercase letter), "
              "got '{}'",
              printable(whole), printable(part));
  return std::string(part);
}

}  // namespace spark

#include "generator/kernel_key.h"

#include <charconv>
#include <vector>

#include <xxhash.h>

#include "core/error.h"

namespace spark {

std::string_view to_string(WeightFormat f) { return f == WeightFormat::kBf16 ? "bf16" : "mxfp8"; }
std::string_view to_string(OutDtype d) { return d == OutDtype::kBf16 ? "bf16" : "e4m3"; }

WeightFormat parse_weight_format(std::string_view s) {
  if (s == "bf16") return WeightFormat::kBf16;
  if (s == "mxfp8") return WeightFormat::kMxfp8;
  SPARK_FAIL(SPARK_ERROR_INVALID_ARGUMENT, "weight format '{}' is not one of bf16, mxfp8", s);
}

OutDtype parse_out_dtype(std::string_view s) {
  if (s == "bf16") return OutDtype::kBf16;
  if (s == "e4m3") return OutDtype::kE4m3;
  SPARK_FAIL(SPARK_ERROR_INVALID_ARGUMENT, "output dtype '{}' is not one of bf16, e4m3", s);
}

std::string KernelKey::name() const {
  return fmt::format("{}.h{}.k{}.n{}.r{}.m{}-{}.w{}.o{}.{}", op, heads, k, n, r, regime.m_min,
                     regime.m_max, to_string(weights), to_string(out), arch);
}

namespace {

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

int parse_int(std::string_view text, std::string_view field, std::string_view whole) {
  int v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  SPARK_CHECK(ec == std::errc() && ptr == text.data() + text.size() && !text.empty() && v >= 0,
              SPARK_ERROR_INVALID_ARGUMENT, "kernel key '{}': field {} '{}' is not a number", whole,
              field, text);
  return v;
}

int parse_prefixed(std::string_view part, char prefix, std::string_view field, std::string_view whole) {
  SPARK_CHECK(!part.empty() && part[0] == prefix, SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': expected {} as '{}<number>', got '{}'", whole, field, prefix, part);
  return parse_int(part.substr(1), field, whole);
}

}  // namespace

KernelKey KernelKey::parse(std::string_view name) {
  const auto parts = split(name, '.');
  SPARK_CHECK(parts.size() == 9, SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': expected 9 dot-separated fields "
              "(op.hH.kK.nN.rR.mLO-HI.wFMT.oDTYPE.ARCH), got {}",
              name, parts.size());
  KernelKey key;
  key.op = std::string(parts[0]);
  SPARK_CHECK(key.op == "mla_qproj", SPARK_ERROR_INVALID_ARGUMENT, "kernel key '{}': unknown op '{}'",
              name, key.op);
  key.heads = parse_prefixed(parts[1], 'h', "heads", name);
  key.k = parse_prefixed(parts[2], 'k', "k", name);
  key.n = parse_prefixed(parts[3], 'n', "n", name);
  key.r = parse_prefixed(parts[4], 'r', "r", name);
  const std::string_view m = parts[5];
  const size_t dash = m.find('-');
  SPARK_CHECK(!m.empty() && m[0] == 'm' && dash != std::string_view::npos, SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': expected the M regime as 'mLO-HI', got '{}'", name, m);
  key.regime.m_min = parse_int(m.substr(1, dash - 1), "m_min", name);
  key.regime.m_max = parse_int(m.substr(dash + 1), "m_max", name);
  SPARK_CHECK(key.regime.m_min >= 1 && key.regime.m_min <= key.regime.m_max,
              SPARK_ERROR_INVALID_ARGUMENT, "kernel key '{}': empty M regime '{}'", name, m);
  SPARK_CHECK(parts[6].size() > 1 && parts[6][0] == 'w', SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': expected the weight format as 'w<fmt>', got '{}'", name, parts[6]);
  key.weights = parse_weight_format(parts[6].substr(1));
  SPARK_CHECK(parts[7].size() > 1 && parts[7][0] == 'o', SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': expected the output dtype as 'o<dtype>', got '{}'", name, parts[7]);
  key.out = parse_out_dtype(parts[7].substr(1));
  key.arch = std::string(parts[8]);
  SPARK_CHECK(key.arch.rfind("sm_", 0) == 0 && key.arch.size() > 3, SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': expected an arch like sm_90a, got '{}'", name, key.arch);
  return key;
}

uint64_t KernelKey::hash() const {
  const std::string n = name();
  return XXH3_64bits(n.data(), n.size());
}

bool KernelKey::operator==(const KernelKey& o) const {
  return op == o.op && heads == o.heads && k == o.k && n == o.n && r == o.r && regime == o.regime &&
         weights == o.weights && out == o.out && arch == o.arch;
}

}  // namespace spark

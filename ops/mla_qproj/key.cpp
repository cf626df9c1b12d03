#include "ops/mla_qproj/key.h"

#include <charconv>
#include <vector>

#include <xxhash.h>

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

namespace {

// `text` for a message: control and non-ASCII bytes as \xNN (a name read from a directory
// listing or an archive must not reach a terminal as escape sequences), cut at 200 bytes.
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

}  // namespace

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

std::string shape_problem(int heads, int k, int n, int r, const ShapeArgNames& names) {
  if (heads < 1 || heads > kMaxHeads)
    return fmt::format("argument '{}': {} is not supported (1..{})", names.heads, heads, kMaxHeads);
  if (k != 128 && k != 192) return fmt::format("argument '{}': {} is not supported (128 or 192)", names.k, k);
  if (n != 512) return fmt::format("argument '{}': {} is not supported (512)", names.n, n);
  if (r != 64) return fmt::format("argument '{}': {} is not supported (64)", names.r, r);
  return {};
}

KernelKey KernelKey::of(int heads, int k, MRegime regime, WeightFormat weights, OutDtype out, std::string arch,
                         int n, int r) {
  KernelKey key;
  key.heads = heads;
  key.k = k;
  key.n = n;
  key.r = r;
  key.regime = regime;
  key.weights = weights;
  key.out = out;
  key.arch = std::move(arch);
  return key;
}

std::string KernelKey::name() const {
  return fmt::format("{}.h{}.k{}.n{}.r{}.m{}-{}.w{}.o{}.{}", op, heads, k, n, r, regime.m_min,
                     regime.m_max, to_string(weights), to_string(out), arch);
}

namespace {

// The bounds of a key's fields (KernelKey::parse accepts nothing outside them).
constexpr int kMaxKeyHeads = 1024;
constexpr int kMaxKeyDim = 65536;

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

// A number exactly as name() prints it: decimal digits without sign or leading zero, in
// lo..hi (lo >= 1).
int parse_number(std::string_view text, int lo, int hi, std::string_view field, std::string_view whole) {
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

int parse_prefixed(std::string_view part, char prefix, int lo, int hi, std::string_view field,
                   std::string_view whole) {
  SPARK_CHECK(!part.empty() && part[0] == prefix, SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': expected {} as '{}<number>', got '{}'", printable(whole), field, prefix,
              printable(part));
  return parse_number(part.substr(1), lo, hi, field, whole);
}

}  // namespace

KernelKey KernelKey::parse(std::string_view name) {
  const auto parts = split(name, '.');
  SPARK_CHECK(parts.size() == 9, SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': expected 9 dot-separated fields "
              "(op.hH.kK.nN.rR.mLO-HI.wFMT.oDTYPE.ARCH), got {}",
              printable(name), parts.size());
  KernelKey key;
  SPARK_CHECK(parts[0] == "mla_qproj", SPARK_ERROR_INVALID_ARGUMENT, "kernel key '{}': unknown op '{}'",
              printable(name), printable(parts[0]));
  key.op = std::string(parts[0]);
  key.heads = parse_prefixed(parts[1], 'h', 1, kMaxKeyHeads, "heads", name);
  key.k = parse_prefixed(parts[2], 'k', 1, kMaxKeyDim, "k", name);
  key.n = parse_prefixed(parts[3], 'n', 1, kMaxKeyDim, "n", name);
  key.r = parse_prefixed(parts[4], 'r', 1, kMaxKeyDim, "r", name);
  const std::string_view m = parts[5];
  const size_t dash = m.find('-');
  SPARK_CHECK(!m.empty() && m[0] == 'm' && dash != std::string_view::npos, SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': expected the M regime as 'mLO-HI', got '{}'", printable(name), printable(m));
  key.regime.m_min = parse_number(m.substr(1, dash - 1), 1, kMaxM, "m_min", name);
  key.regime.m_max = parse_number(m.substr(dash + 1), 1, kMaxM, "m_max", name);
  SPARK_CHECK(key.regime.m_min <= key.regime.m_max, SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': empty M regime '{}'", printable(name), printable(m));
  SPARK_CHECK(parts[6].size() > 1 && parts[6][0] == 'w', SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': expected the weight format as 'w<fmt>', got '{}'", printable(name),
              printable(parts[6]));
  key.weights = parse_weight_format(parts[6].substr(1));
  SPARK_CHECK(parts[7].size() > 1 && parts[7][0] == 'o', SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': expected the output dtype as 'o<dtype>', got '{}'", printable(name),
              printable(parts[7]));
  key.out = parse_out_dtype(parts[7].substr(1));
  SPARK_CHECK(is_arch_name(parts[8]), SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': expected an arch like sm_90a ('sm_', 2-3 digits, an optional lowercase letter), "
              "got '{}'",
              printable(name), printable(parts[8]));
  key.arch = std::string(parts[8]);
  return key;
}

bool is_canonical_key_name(std::string_view name) noexcept {
  try {
    return KernelKey::parse(name).name() == name;
  } catch (...) {
    return false;
  }
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

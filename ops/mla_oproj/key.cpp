#include "ops/mla_oproj/key.h"

#include "core/error.h"

namespace spark::oproj {

std::string shape_problem(int heads, int l, int v, const ShapeArgNames& names) {
  if (heads < 1 || heads > kMaxHeads)
    return fmt::format("argument '{}': {} is not supported (1..{})", names.heads, heads, kMaxHeads);
  if (l != 512) return fmt::format("argument '{}': {} is not supported (512)", names.l, l);
  if (v != 128 && v != 256) return fmt::format("argument '{}': {} is not supported (128 or 256)", names.v, v);
  return {};
}

Key Key::of(int heads, int v, MRegime regime, WeightFormat weights, OutDtype out, std::string arch, int l) {
  Key key;
  key.heads = heads;
  key.v = v;
  key.l = l;
  key.regime = regime;
  key.weights = weights;
  key.out = out;
  key.arch = std::move(arch);
  return key;
}

std::string Key::name() const {
  return fmt::format("{}.h{}.v{}.l{}.m{}-{}.w{}.o{}.{}", kOp, heads, v, l, regime.m_min, regime.m_max,
                     to_string(weights), to_string(out), arch);
}

namespace {

// The bounds of a key's fields (Key::parse accepts nothing outside them).
constexpr int kMaxKeyHeads = 1024;
constexpr int kMaxKeyDim = 65536;

}  // namespace

Key Key::parse(std::string_view name) {
  const auto parts = split(name, '.');
  SPARK_CHECK(parts.size() == 8, SPARK_ERROR_INVALID_ARGUMENT,
              "kernel key '{}': expected 8 dot-separated fields (mla_oproj.hH.vV.lL.mLO-HI.wFMT.oDTYPE.ARCH), got {}",
              printable(name), parts.size());
  SPARK_CHECK(parts[0] == kOp, SPARK_ERROR_INVALID_ARGUMENT, "kernel key '{}': unknown op '{}'", printable(name),
              printable(parts[0]));
  Key key;
  key.heads = parse_key_prefixed(parts[1], 'h', 1, kMaxKeyHeads, "heads", name);
  key.v = parse_key_prefixed(parts[2], 'v', 1, kMaxKeyDim, "v", name);
  key.l = parse_key_prefixed(parts[3], 'l', 1, kMaxKeyDim, "l", name);
  key.regime = parse_key_regime(parts[4], kMaxM, name);
  key.weights = parse_key_weights(parts[5], name);
  key.out = parse_key_out(parts[6], name);
  key.arch = parse_key_arch(parts[7], name);
  return key;
}

bool is_canonical_key_name(std::string_view name) noexcept {
  try {
    return Key::parse(name).name() == name;
  } catch (...) {
    return false;
  }
}

bool Key::operator==(const Key& o) const {
  return heads == o.heads && v == o.v && l == o.l && regime == o.regime && weights == o.weights && out == o.out &&
         arch == o.arch;
}

}  // namespace spark::oproj

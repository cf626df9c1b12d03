#include "ops/mla_qproj/key.h"

#include <vector>

#include <xxhash.h>

#include "core/error.h"

namespace spark {

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
  key.heads = parse_key_prefixed(parts[1], 'h', 1, kMaxKeyHeads, "heads", name);
  key.k = parse_key_prefixed(parts[2], 'k', 1, kMaxKeyDim, "k", name);
  key.n = parse_key_prefixed(parts[3], 'n', 1, kMaxKeyDim, "n", name);
  key.r = parse_key_prefixed(parts[4], 'r', 1, kMaxKeyDim, "r", name);
  key.regime = parse_key_regime(parts[5], kMaxM, name);
  key.weights = parse_key_weights(parts[6], name);
  key.out = parse_key_out(parts[7], name);
  key.arch = parse_key_arch(parts[8], name);
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

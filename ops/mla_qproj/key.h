// KernelKey: everything a generated kernel is specialised on.  Prints to a readable
// name that parses back, e.g.  mla_qproj.h8.k192.n512.r64.m1-16.wbf16.obf16.sm_90a
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace spark {

enum class WeightFormat { kBf16 = 0, kMxfp8 = 1 };
enum class OutDtype { kBf16 = 0, kE4m3 = 1 };

std::string_view to_string(WeightFormat f);
std::string_view to_string(OutDtype d);
WeightFormat parse_weight_format(std::string_view s);  // "bf16" | "mxfp8"
OutDtype parse_out_dtype(std::string_view s);          // "bf16" | "e4m3"

// An inclusive range of M served by one kernel.
struct MRegime {
  int m_min = 1;
  int m_max = 1;
  bool contains(int m) const { return m >= m_min && m <= m_max; }
  bool operator==(const MRegime& o) const { return m_min == o.m_min && m_max == o.m_max; }
};

struct KernelKey {
  std::string op = "mla_qproj";
  int heads = 0;  // H
  int k = 0;      // nope dim
  int n = 0;      // latent dim
  int r = 0;      // rope dim
  MRegime regime;
  WeightFormat weights = WeightFormat::kBf16;
  OutDtype out = OutDtype::kBf16;
  std::string arch;  // "sm_90a", ...

  std::string name() const;
  // Accepts exactly the names name() prints, so parse(s).name() == s: numbers in decimal
  // without sign or leading zero (heads 1..1024; k, n, r 1..65536; the regime within
  // 1..8192), and an arch of "sm_", 2-3 digits and an optional lowercase letter.  Cache
  // entry names are built from keys and printed by tools, so nothing else (no control
  // character) gets through.  Throws spark::Error (INVALID_ARGUMENT) naming the field that
  // does not parse.
  static KernelKey parse(std::string_view name);
  uint64_t hash() const;
  bool operator==(const KernelKey& o) const;
  bool operator!=(const KernelKey& o) const { return !(*this == o); }
};

// Whether `name` is a key name KernelKey::parse accepts (and so one name() prints); never throws.
bool is_canonical_key_name(std::string_view name) noexcept;

struct KernelKeyHash {
  size_t operator()(const KernelKey& k) const { return static_cast<size_t>(k.hash()); }
};

}  // namespace spark

// KernelKey: everything a generated kernel is specialised on.  Prints to a readable
// name that parses back, e.g.  mla_qproj.h8.k192.n512.r64.m1-16.wbf16.obf16.sm_90a
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ops/common/formats.h"
#include "spark/spark.h"

namespace spark {

// The largest M of a call (and so of a regime).
inline constexpr int kMaxM = SPARK_MLA_QPROJ_MAX_M;
inline constexpr int kMaxHeads = 128;

// The names a caller gives H, K, N and R in its messages: the C fields, or a tool's flags.
struct ShapeArgNames {
  const char* heads = "heads";
  const char* k = "nope_dim";
  const char* n = "latent_dim";
  const char* r = "rope_dim";
};
// Why (H, K, N, R) is not a shape spark implements ("argument 'nope_dim': 96 is not supported
// (128 or 192)"); empty when it is.  The one statement of the supported shapes.
std::string shape_problem(int heads, int k, int n, int r, const ShapeArgNames& names = {});

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

  // A key from its fields (N and R: the only ones supported, 512 and 64, unless given).
  static KernelKey of(int heads, int k, MRegime regime, WeightFormat weights, OutDtype out, std::string arch,
                      int n = 512, int r = 64);

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

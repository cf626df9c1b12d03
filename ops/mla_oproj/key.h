// The key of the MLA value up-projection: everything one of its kernels is specialised on.
// Prints to a readable name that parses back, e.g.
//   mla_oproj.h16.v128.l512.m9-16.wbf16.obf16.sm_90a
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ops/common/formats.h"
#include "spark/spark.h"

namespace spark::oproj {

inline constexpr const char* kOp = "mla_oproj";
// The largest M of a call (and so of a regime).
inline constexpr int kMaxM = SPARK_MLA_OPROJ_MAX_M;
inline constexpr int kMaxHeads = 128;

// The names a caller gives H, L and V in its messages: the C fields, or a tool's flags.
struct ShapeArgNames {
  const char* heads = "heads";
  const char* l = "latent_dim";
  const char* v = "v_head_dim";
};
// Why (H, L, V) is not a shape spark implements; empty when it is.  The one statement of
// the supported shapes: H 1..128, L 512, V 128 or 256.
std::string shape_problem(int heads, int l, int v, const ShapeArgNames& names = {});

struct Key {
  int heads = 0;  // H
  int v = 0;      // v_head_dim
  int l = 0;      // latent_dim (the reduction)
  MRegime regime;
  WeightFormat weights = WeightFormat::kBf16;
  OutDtype out = OutDtype::kBf16;
  std::string arch;  // "sm_90a", ...

  static Key of(int heads, int v, MRegime regime, WeightFormat weights, OutDtype out, std::string arch,
                int l = 512);
  std::string name() const;
  // Accepts exactly the names name() prints (numbers in decimal without sign or leading
  // zero: heads 1..1024, v and l 1..65536, the regime within 1..8192; an arch as
  // core/key_name.h states it).  Throws spark::Error (INVALID_ARGUMENT) naming the field.
  static Key parse(std::string_view name);
  bool operator==(const Key& o) const;
  bool operator!=(const Key& o) const { return !(*this == o); }
};

// Whether `name` is a key name Key::parse accepts and name() prints; never throws.
bool is_canonical_key_name(std::string_view name) noexcept;

}  // namespace spark::oproj

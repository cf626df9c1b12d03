// The problem the fake-driver tests run spark on: H 8, K 192, N 512, R 64, BF16 weights,
// M <= 16 (so one kernel per output dtype), with handles that destroy themselves and arguments
// at fake device addresses (16-byte aligned, far apart: the fake never dereferences them).
#pragma once

#include <cstdint>
#include <cstring>

#include "ops/mla_qproj/key.h"
#include "ops/mla_qproj/tiles.h"
#include "spark/spark.h"

namespace spark_test {

constexpr int kHeads = 8, kK = 192, kN = 512, kR = 64, kMaxM = 16;
constexpr uintptr_t kQ = 0x10000000, kW = 0x20000000, kOut = 0x30000000, kQScale = 0x40000000;

// A plan declared after its context is destroyed first.
struct Context {
  spark_context h = nullptr;
  ~Context() { destroy(); }
  void destroy() {
    spark_context_destroy(h);
    h = nullptr;
  }
};

struct Plan {
  spark_mla_qproj_plan h = nullptr;
  ~Plan() { destroy(); }
  void destroy() {
    spark_mla_qproj_plan_destroy(h);
    h = nullptr;
  }
};

inline spark_mla_qproj_desc make_desc(spark_dtype out, int heads = kHeads) {
  spark_mla_qproj_desc d = SPARK_MLA_QPROJ_DESC_INIT;
  d.heads = heads;
  d.nope_dim = kK;
  d.latent_dim = kN;
  d.rope_dim = kR;
  d.out_dtype = out;
  return d;
}

// The server layout: q [M, H, K+R] token-major (q_nope = q[..., :K], q_pe = q[..., K:]),
// w [H, K, N], out [M, H, N+R].
inline spark_mla_qproj_args make_args(const spark_mla_qproj_desc& d, int m) {
  spark_mla_qproj_args a = SPARK_MLA_QPROJ_ARGS_INIT;
  a.m = m;
  const int64_t qrow = kK + kR;
  a.q_nope = reinterpret_cast<const void*>(kQ);
  a.q_nope_stride_h = qrow;
  a.q_nope_stride_m = d.heads * qrow;
  a.q_pe = reinterpret_cast<const void*>(kQ + 2 * kK);
  a.q_pe_stride_m = d.heads * qrow;
  a.q_pe_stride_h = qrow;
  a.w = reinterpret_cast<const void*>(kW);
  a.w_stride_h = int64_t{kK} * kN;
  a.w_stride_k = kN;
  a.out = reinterpret_cast<void*>(kOut);
  a.out_stride_h = kN + kR;
  a.out_stride_m = d.heads * (kN + kR);
  if (d.out_dtype == SPARK_DTYPE_E4M3) a.q_scale = reinterpret_cast<const float*>(kQScale);
  return a;
}

// The key spark builds for desc at M 1-16 on the fake's sm_90 (sm_90a).
inline spark::KernelKey key_for(const spark_mla_qproj_desc& d) {
  spark::KernelKey key;
  key.heads = d.heads;
  key.k = d.nope_dim;
  key.n = d.latent_dim;
  key.r = d.rope_dim;
  key.regime = spark::regime_for_m("sm_90a", 1).regime;
  key.weights = spark::WeightFormat::kBf16;
  key.out = d.out_dtype == SPARK_DTYPE_BF16 ? spark::OutDtype::kBf16 : spark::OutDtype::kE4m3;
  key.arch = "sm_90a";
  return key;
}

}  // namespace spark_test

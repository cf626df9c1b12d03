// GPU correctness suite of spark_mla_oproj_run, the MLA value up-projection
//
//   out[m, h*V + v] = sum_l o[m, h, l] * W_UV[h, l, v]        (FP32 accumulation)
//
// with bf16, MXFP8 and block-FP8 weights and bf16 or e4m3 output.
//
// Exits SPARK_SKIP_CODE (77) with a message where there is no CUDA device.
//
// Layouts, as an inference server has them (L = 512; K = 128 for V = 128, K = 192 for V = 256):
//   o      bf16 [M, H, L], one of: token-major with 64 elements after each token
//          (o_stride_h L, o_stride_m H*L + 64), token-major dense (o_stride_m H*L), or head-major
//          (o_stride_m L, o_stride_h M*L + 64); the padding holds NaN
//   W_UV   the last V rows of each head of a packed kv_b_proj [H*(K+V), L] (w = pack + K*L,
//          w_stride_h (K+V)*L, w_stride_v L): bf16, or e4m3 with the pack's e8m0 scales
//          [H*(K+V), 16] (MXFP8) or its fp32 block scales [ceil(H*(K+V)/128), 4] (block FP8; with
//          K+V = 448 the blocks straddle heads).  Every pack element outside the view is NaN, and so
//          is every block scale no view row uses, so a read outside the view shows up as NaN.
//   out    [M (+3 sentinel rows), out_stride_m] with H*V used columns, out_stride_m H*V or H*V + 8;
//          poisoned with 0xFF bytes (bf16 and e4m3 NaN) before every run.
//
// Cases:
//   1. plans of every shape of the suite, created in parallel;
//   2. accuracy over H x V x M for each weight format, bf16 and e4m3 out: error vs float64 (on the
//      dequantised weights) <= 1.05 x cuBLAS bf16 batched GEMM's on the same inputs, sentinels and
//      pitch untouched, determinism, e4m3 out bitwise the rule applied to the kernel's own bf16
//      result;
//   3. effective weights bitwise (one-hot o: row m = e_m, so out row m is W_UV[:, m, :]): MXFP8
//      with every value code and scale bytes 0..246, again with bytes 0..134 only (every group
//      in the range a kernel may dequantise without floats), then NaN scale byte / value code; block FP8
//      with every value code and scales 2^-135 .. 2^101 (subnormal products included);
//   4. CUDA graph capture + replay with new o, weights and out_scale, for each weight format;
//   5. PDL plan: bitwise a plain plan's output, reading the o written by the kernel just before;
//   6. argument errors: a status, a message naming the argument, nothing written.
//
// Run with SPARK_TEST_SEED=<seed> to reproduce the random data of a failing run.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "spark/spark.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/mxfp8_data.h"
#include "tests/support/reference.h"

using namespace spark_test;
using namespace spark_gpu;

namespace {

constexpr int kL = 512;                  // latent_dim
constexpr int kGroups = kL / 32;         // MXFP8 scale bytes per weight row
constexpr int kBlock = 128;              // block FP8: 128 x 128 blocks of the packed weight
constexpr int kScaleCols = kL / kBlock;  // block scales per block row
constexpr int kOPad = 64;                // elements after each token (or head) of o in the padded layouts
constexpr int kOutPad = 8;               // out_stride_m - H*V of the pitched cases
constexpr uint16_t kGuardBf16 = 0xFFFF;  // a NaN: what lies outside every input view
// W_UV ~ N(0, 0.05^2): with L = 512 the output is ~N(0, 1.1^2), so the harness' out scales put
// the e4m3 output in its subnormals, its middle and its saturation.
constexpr float kWeightStd = 0.05f;
// max_m of the main oproj plans: past 1024, so the suites reach the 1024-8192 regime's kernel.
constexpr int kOMaxM = 1100;

// Rows per head of the packed kv_b_proj before W_UV's: DeepSeek-V3 / Kimi-K2 128 (V 128),
// GLM 192 (V 256).
int nope_for(int V) { return V == 256 ? 192 : 128; }

// Every (H, V) of the suite; the cases below use no other, so once the plans test has loaded
// their kernels every later plan is created at once.
struct HeadsV {
  int H, V;
};
constexpr HeadsV kShapes[] = {{1, 128}, {8, 256}, {16, 128}, {11, 256}, {16, 256}, {64, 256}, {128, 128}};
constexpr spark_weight_format kFormats[] = {SPARK_WEIGHTS_BF16, SPARK_WEIGHTS_MXFP8, SPARK_WEIGHTS_FP8_BLOCK128};

// ---------------------------------------------------------------------------------------
// One call's shapes and layouts.
// ---------------------------------------------------------------------------------------

enum class OLayout { kTokenPadded, kTokenDense, kHeadMajor };

const char* layout_name(OLayout l) {
  switch (l) {
    case OLayout::kTokenPadded: return "token-major padded";
    case OLayout::kTokenDense: return "token-major dense";
    case OLayout::kHeadMajor: return "head-major";
  }
  return "?";
}

struct Case {
  int H = 0, V = 0, M = 0;
  OLayout o_layout = OLayout::kTokenPadded;
  bool pitched = false;  // out_stride_m = H*V + 8, else H*V

  int cols() const { return H * V; }
  int64_t o_stride_m() const {
    switch (o_layout) {
      case OLayout::kTokenPadded: return static_cast<int64_t>(H) * kL + kOPad;
      case OLayout::kTokenDense: return static_cast<int64_t>(H) * kL;
      case OLayout::kHeadMajor: return kL;
    }
    return 0;
  }
  int64_t o_stride_h() const {
    return o_layout == OLayout::kHeadMajor ? static_cast<int64_t>(M) * kL + kOPad : kL;
  }
  // The whole o allocation.
  size_t o_elems() const {
    return static_cast<size_t>(o_layout == OLayout::kHeadMajor ? H * o_stride_h() : M * o_stride_m());
  }
  size_t o_index(int m, int h, int l) const { return static_cast<size_t>(m * o_stride_m() + h * o_stride_h() + l); }
  int64_t out_pitch() const { return cols() + (pitched ? kOutPad : 0); }
  // The whole out allocation: M rows and the sentinel rows.
  size_t out_elems() const { return static_cast<size_t>(M + kSentinelRows) * static_cast<size_t>(out_pitch()); }
  size_t ref_elems() const { return static_cast<size_t>(M) * cols(); }
};

std::string case_str(const Case& c) {
  std::ostringstream o;
  o << "H=" << c.H << " V=" << c.V << " M=" << c.M << " (o " << layout_name(c.o_layout) << ", out_stride_m "
    << c.out_pitch() << ")";
  return o.str();
}

// o's whole allocation: the view from dense [M, H, L] values, NaN everywhere else.
std::vector<uint16_t> layout_o(const Case& c, const std::vector<uint16_t>& dense) {
  std::vector<uint16_t> o(c.o_elems(), kGuardBf16);
  for (int m = 0; m < c.M; ++m)
    for (int h = 0; h < c.H; ++h) {
      const auto src = dense.begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(m) * c.H + h) * kL);
      std::copy(src, src + kL, o.begin() + static_cast<std::ptrdiff_t>(c.o_index(m, h, 0)));
    }
  return o;
}

// o ~ N(0, 1) in bf16, never zero.
std::vector<uint16_t> random_o(const Case& c, uint64_t seed) {
  std::vector<uint16_t> dense(static_cast<size_t>(c.M) * c.H * kL);
  fill_bf16_random(dense.data(), dense.size(), seed, 1.0f);
  return layout_o(c, dense);
}

// One-hot o: row m of every head is e_(m mod L) (1.0 at l = m mod L, +0 elsewhere), so
// out[m, h*V + v] is W_UV[h, m mod L, v] itself.
std::vector<uint16_t> identity_o(const Case& c) {
  std::vector<uint16_t> dense(static_cast<size_t>(c.M) * c.H * kL, 0);
  for (int m = 0; m < c.M; ++m)
    for (int h = 0; h < c.H; ++h) dense[(static_cast<size_t>(m) * c.H + h) * kL + m % kL] = 0x3F80;  // bf16 1.0
  return layout_o(c, dense);
}

// ---------------------------------------------------------------------------------------
// Weights: the whole packed kv_b_proj (and its scales) as bytes, where the op's arguments
// point into it, and the effective weights as the reference and cuBLAS see them.
// ---------------------------------------------------------------------------------------

struct HostWeights {
  spark_weight_format format = SPARK_WEIGHTS_BF16;
  int H = 0, V = 0;
  std::vector<uint8_t> pack;          // bf16: 2 bytes per element
  std::vector<uint8_t> scales;        // e8m0 bytes or fp32 scales; empty for bf16
  size_t w_offset = 0, s_offset = 0;  // bytes from the packs' bases to w and w_scale
  int64_t w_stride_h = 0, w_stride_v = 0, s_stride_h = 0, s_stride_v = 0;
  std::vector<uint16_t> wd;  // dense [H, V, L] bf16: the dequantised weights
};

HostWeights bf16_weights(int H, int V, std::vector<uint16_t> wd) {
  const int K = nope_for(V), P = K + V;
  std::vector<uint16_t> pack(static_cast<size_t>(H) * P * kL, kGuardBf16);
  for (int h = 0; h < H; ++h)
    for (int v = 0; v < V; ++v) {
      const auto src = wd.begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(h) * V + v) * kL);
      std::copy(src, src + kL, pack.begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(h) * P + K + v) * kL));
    }
  HostWeights w;
  w.format = SPARK_WEIGHTS_BF16;
  w.H = H;
  w.V = V;
  w.pack.resize(pack.size() * 2);
  std::memcpy(w.pack.data(), pack.data(), w.pack.size());
  w.w_offset = static_cast<size_t>(K) * kL * 2;
  w.w_stride_h = static_cast<int64_t>(P) * kL;
  w.w_stride_v = kL;
  // No scales (w_scale NULL); the strides an MXFP8 pack would have, so a validator that
  // checks every stride > 0 whatever the format has nothing to object to.
  w.s_stride_h = static_cast<int64_t>(P) * kGroups;
  w.s_stride_v = kGroups;
  w.wd = std::move(wd);
  return w;
}

// The mxfp8_data layout with W_UV's V rows per head as its "K" rows, K*L bytes into each
// head's K+V rows (and the scales K*16 bytes into theirs).
MxLayout server_mx_layout(int H, int V) {
  const int K = nope_for(V);
  MxLayout l;
  l.name = "server";
  l.H = H;
  l.K = V;
  l.pack_rows = K + V;
  l.w_offset = static_cast<int64_t>(K) * kL;
  l.w_stride_h = static_cast<int64_t>(K + V) * kL;
  l.w_stride_k = kL;
  l.s_offset = static_cast<int64_t>(K) * kGroups;
  l.s_stride_h = static_cast<int64_t>(K + V) * kGroups;
  l.s_stride_k = kGroups;
  return l;
}

HostWeights mx_weights(const MxWeights& m) {
  HostWeights w;
  w.format = SPARK_WEIGHTS_MXFP8;
  w.H = m.H();
  w.V = m.K();
  w.pack = m.values;
  w.scales = m.scales;
  w.w_offset = static_cast<size_t>(m.layout.w_offset);
  w.w_stride_h = m.layout.w_stride_h;
  w.w_stride_v = m.layout.w_stride_k;
  w.s_offset = static_cast<size_t>(m.layout.s_offset);
  w.s_stride_h = m.layout.s_stride_h;
  w.s_stride_v = m.layout.s_stride_k;
  w.wd = m.dequantised();
  return w;
}

// MXFP8 as a checkpoint holds bf16 weights: each group of 32 along L gets the scale
// 2^(floor(log2(amax)) - 8) (8: e4m3's largest exponent) and the values e4m3(w / scale),
// saturating.
void quantise_mx(MxWeights& m, const std::vector<uint16_t>& wd) {
  const int H = m.H(), V = m.K();
  parallel_for(static_cast<size_t>(H) * V, [&](size_t b, size_t e, unsigned) {
    for (size_t hv = b; hv < e; ++hv) {
      const int h = static_cast<int>(hv / V), v = static_cast<int>(hv % V);
      const uint16_t* row = wd.data() + hv * kL;
      for (int j = 0; j < kGroups; ++j) {
        float amax = 0.0f;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(bf16_to_float(row[32 * j + i])));
        int e2 = 0;
        (void)std::frexp(amax, &e2);  // amax = f * 2^e2, f in [0.5, 1)
        const int byte = std::min(254, std::max(0, e2 - 1 - 8 + 127));
        m.scale(h, v, j) = static_cast<uint8_t>(byte);
        for (int i = 0; i < 32; ++i)
          m.value(h, v, 32 * j + i) = float_to_e4m3_satfinite_rne(std::ldexp(bf16_to_float(row[32 * j + i]), 127 - byte));
      }
    }
  });
}

// A packed e4m3 kv_b_proj [H*P, L] and its fp32 block scales [ceil(H*P/128), 4], P = K + V.
struct BlockPack {
  int H, V, K, P;
  std::vector<uint8_t> values;  // 0xFF (NaN) outside the view
  std::vector<float> scales;    // NaN on the blocks no view row lies in

  BlockPack(int h, int v) : H(h), V(v), K(nope_for(v)), P(nope_for(v) + v) {
    values.assign(static_cast<size_t>(H) * P * kL, 0xFF);
    scales.assign(static_cast<size_t>(block_rows()) * kScaleCols, std::numeric_limits<float>::quiet_NaN());
  }
  int block_rows() const { return (H * P + kBlock - 1) / kBlock; }
  // The packed row of W_UV[h, :, v]: (h + 1) * P - V + v.
  int64_t row(int h, int v) const { return static_cast<int64_t>(h) * P + K + v; }
  uint8_t& value(int h, int v, int l) { return values[static_cast<size_t>(row(h, v)) * kL + l]; }
  uint8_t value(int h, int v, int l) const { return values[static_cast<size_t>(row(h, v)) * kL + l]; }
  float& scale_of(int h, int v, int l) {
    return scales[static_cast<size_t>(row(h, v) / kBlock) * kScaleCols + l / kBlock];
  }
  float scale_of(int h, int v, int l) const {
    return scales[static_cast<size_t>(row(h, v) / kBlock) * kScaleCols + l / kBlock];
  }
  uint16_t dequant(int h, int v, int l) const { return dequant_fp8_block(value(h, v, l), scale_of(h, v, l)); }
  std::vector<uint16_t> dequantised() const {
    std::vector<uint16_t> d(static_cast<size_t>(H) * V * kL);
    parallel_for(static_cast<size_t>(H) * V, [&](size_t b, size_t e, unsigned) {
      for (size_t hv = b; hv < e; ++hv)
        for (int l = 0; l < kL; ++l)
          d[hv * kL + l] = dequant(static_cast<int>(hv / V), static_cast<int>(hv % V), l);
    });
    return d;
  }
};

// Block FP8 as the checkpoints hold it: per 128 x 128 block, scale = amax / 448 over the
// block's view elements, values e4m3(w / scale).
void quantise_block(BlockPack& bp, const std::vector<uint16_t>& wd) {
  const int64_t pack_rows = static_cast<int64_t>(bp.H) * bp.P;
  parallel_for(static_cast<size_t>(bp.block_rows()), [&](size_t b, size_t e, unsigned) {
    for (size_t br = b; br < e; ++br) {
      const int64_t p0 = static_cast<int64_t>(br) * kBlock, p1 = std::min(pack_rows, p0 + kBlock);
      float amax[kScaleCols] = {};
      for (int pass = 0; pass < 2; ++pass) {
        for (int64_t p = p0; p < p1; ++p) {
          const int h = static_cast<int>(p / bp.P), r = static_cast<int>(p % bp.P);
          if (r < bp.K) continue;  // a row of W_UK: not in the view
          const int v = r - bp.K;
          const uint16_t* src = wd.data() + (static_cast<size_t>(h) * bp.V + v) * kL;
          for (int l = 0; l < kL; ++l) {
            const float x = bf16_to_float(src[l]);
            if (pass == 0) {
              amax[l / kBlock] = std::max(amax[l / kBlock], std::fabs(x));
            } else {
              bp.value(h, v, l) = float_to_e4m3_satfinite_rne(x / bp.scale_of(h, v, l));
            }
          }
        }
        if (pass == 0)
          for (int j = 0; j < kScaleCols; ++j)
            if (amax[j] > 0.0f) bp.scales[br * kScaleCols + j] = amax[j] / 448.0f;
      }
    }
  });
}

HostWeights block_weights(const BlockPack& bp) {
  HostWeights w;
  w.format = SPARK_WEIGHTS_FP8_BLOCK128;
  w.H = bp.H;
  w.V = bp.V;
  w.pack = bp.values;
  w.scales.resize(bp.scales.size() * sizeof(float));
  std::memcpy(w.scales.data(), bp.scales.data(), w.scales.size());
  w.w_offset = static_cast<size_t>(bp.K) * kL;
  w.w_stride_h = static_cast<int64_t>(bp.P) * kL;
  w.w_stride_v = kL;
  w.s_offset = 0;  // w_scale points at the scales of the pack's row 0
  w.s_stride_h = bp.P;
  w.s_stride_v = kScaleCols;
  w.wd = bp.dequantised();
  return w;
}

// Weights ~ N(0, 0.05^2) in bf16, stored in format f.
HostWeights random_weights(spark_weight_format f, int H, int V, uint64_t seed) {
  std::vector<uint16_t> w(static_cast<size_t>(H) * V * kL);
  fill_bf16_random(w.data(), w.size(), seed, kWeightStd);
  if (f == SPARK_WEIGHTS_MXFP8) {
    MxWeights m(server_mx_layout(H, V));
    quantise_mx(m, w);
    return mx_weights(m);
  }
  if (f == SPARK_WEIGHTS_FP8_BLOCK128) {
    BlockPack bp(H, V);
    quantise_block(bp, w);
    return block_weights(bp);
  }
  return bf16_weights(H, V, std::move(w));
}

struct DeviceWeights {
  DeviceBuffer pack, scales;
  spark_weight_format format = SPARK_WEIGHTS_BF16;
  size_t w_offset = 0, s_offset = 0;
  int64_t w_stride_h = 0, w_stride_v = 0, s_stride_h = 0, s_stride_v = 0;
};

// Allocates on first use, then uploads into the same buffers (a captured graph keeps them).
void upload_weights(DeviceWeights& d, const HostWeights& w, cudaStream_t st) {
  if (d.pack.bytes() == 0) {
    DEVICE_ALLOC(d.pack, w.pack.size());
    if (!w.scales.empty()) DEVICE_ALLOC(d.scales, w.scales.size());
  }
  REQUIRE(d.pack.bytes() == w.pack.size());
  REQUIRE(d.scales.bytes() == w.scales.size());
  upload(d.pack.get(), w.pack.data(), w.pack.size(), st);
  if (!w.scales.empty()) upload(d.scales.get(), w.scales.data(), w.scales.size(), st);
  d.format = w.format;
  d.w_offset = w.w_offset;
  d.s_offset = w.s_offset;
  d.w_stride_h = w.w_stride_h;
  d.w_stride_v = w.w_stride_v;
  d.s_stride_h = w.s_stride_h;
  d.s_stride_v = w.s_stride_v;
}

// The arguments of one call; o starts at o row row0 (token-major layouts only).
spark_mla_oproj_args oproj_args(const Case& c, const void* d_o, const DeviceWeights& w, void* d_out,
                                const float* d_out_scale, int row0 = 0) {
  REQUIRE((row0 == 0 || c.o_layout != OLayout::kHeadMajor));
  spark_mla_oproj_args a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.m = c.M;
  a.o = static_cast<const uint16_t*>(d_o) + row0 * c.o_stride_m();
  a.o_stride_m = c.o_stride_m();
  a.o_stride_h = c.o_stride_h();
  a.w = static_cast<const uint8_t*>(w.pack.get()) + w.w_offset;
  a.w_stride_h = w.w_stride_h;
  a.w_stride_v = w.w_stride_v;
  a.w_scale = w.format == SPARK_WEIGHTS_BF16 ? nullptr : static_cast<const uint8_t*>(w.scales.get()) + w.s_offset;
  a.w_scale_stride_h = w.s_stride_h;
  a.w_scale_stride_v = w.s_stride_v;
  a.out = d_out;
  a.out_stride_m = c.out_pitch();
  a.out_scale = d_out_scale;
  return a;
}

// ---------------------------------------------------------------------------------------
// Plans and runs.
// ---------------------------------------------------------------------------------------

struct OprojPlanDeleter {
  void operator()(spark_mla_oproj_plan p) const { spark_mla_oproj_plan_destroy(p); }
};
using OPlan = std::unique_ptr<std::remove_pointer_t<spark_mla_oproj_plan>, OprojPlanDeleter>;

spark_mla_oproj_desc oproj_desc(int H, int V, spark_weight_format f, spark_dtype d) {
  spark_mla_oproj_desc desc;
  std::memset(&desc, 0, sizeof desc);
  desc.struct_size = sizeof desc;
  desc.heads = H;
  desc.latent_dim = kL;
  desc.v_head_dim = V;
  desc.weight_format = f;
  desc.out_dtype = d;
  return desc;
}

spark_mla_qproj_plan_options plan_options(int max_m, int pdl) {
  spark_mla_qproj_plan_options opts;
  std::memset(&opts, 0, sizeof opts);
  opts.struct_size = sizeof opts;
  opts.max_m = max_m;
  opts.lazy = 0;
  opts.enable_pdl = pdl;
  return opts;
}

OPlan make_oplan(int H, int V, spark_weight_format f, spark_dtype d, int max_m, int pdl = 0) {
  INFO("plan_create H=" << H << " V=" << V << " weights=" << cstr(weights_name(f)) << " dtype=" << cstr(dtype_name(d))
                        << " max_m=" << max_m << " pdl=" << pdl);
  const spark_mla_oproj_desc desc = oproj_desc(H, V, f, d);
  const spark_mla_qproj_plan_options opts = plan_options(max_m, pdl);
  spark_mla_oproj_plan p = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  SPARK_REQUIRE(spark_mla_oproj_plan_create(g_ctx, &desc, &opts, &p));
  REQUIRE(p != nullptr);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (secs > 1.0) {
    std::printf("  (plan H=%d V=%d %s %s max_m=%d pdl=%d created in %.1f s)\n", H, V, weights_name(f), dtype_name(d),
                max_m, pdl, secs);
    std::fflush(stdout);
  }
  return OPlan(p);
}

// Poison out, run, wait, copy the whole out allocation back (sentinels included).
template <typename T>
void run_oproj(spark_mla_oproj_plan plan, const spark_mla_oproj_args& a, const DeviceBuffer& d_out, cudaStream_t st,
               std::vector<T>& host_out) {
  poison(d_out, st);
  SPARK_REQUIRE(spark_mla_oproj_run(plan, &a, reinterpret_cast<spark_stream>(st)));
  CUDA_REQUIRE(cudaStreamSynchronize(st));
  download(host_out, d_out.get(), d_out.bytes() / sizeof(T), st);
}

// cuBLAS bf16 batched GEMM on the same o and the dense effective weights d_wd [H, V, L], one
// batch per head, into dense [H, M, V].  Column-major, both operands L-contiguous: A = W_h as
// stored (L x V, lda L) transposed, B = o_h (L x M, ldb o_stride_m), C_h = A^T B (V x M, ldc V).
void run_cublas_oproj(const Case& c, const void* d_o, const DeviceBuffer& d_wd, const DeviceBuffer& d_c,
                      cudaStream_t st, std::vector<uint16_t>& host_c) {
  const size_t elems = static_cast<size_t>(c.H) * c.M * c.V;
  REQUIRE(d_c.bytes() >= elems * 2);
  REQUIRE(d_wd.bytes() >= static_cast<size_t>(c.H) * c.V * kL * 2);
  CUBLAS_REQUIRE(cublasSetStream(g_cublas, st));
  // Written through the runtime first, as in the harness: initcheck cannot see cuBLAS's stores.
  CUDA_REQUIRE(cudaMemsetAsync(d_c.get(), 0, elems * 2, st));
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_REQUIRE(cublasGemmStridedBatchedEx(
      g_cublas, CUBLAS_OP_T, CUBLAS_OP_N, c.V, c.M, kL, &alpha, d_wd.get(), CUDA_R_16BF, kL,
      static_cast<long long>(c.V) * kL, d_o, CUDA_R_16BF, static_cast<int>(c.o_stride_m()),
      static_cast<long long>(c.o_stride_h()), &beta, d_c.get(), CUDA_R_16BF, c.V, static_cast<long long>(c.M) * c.V,
      c.H, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  CUDA_REQUIRE(cudaStreamSynchronize(st));
  download(host_c, d_c.get(), elems, st);
}

// ---------------------------------------------------------------------------------------
// Host-side checks.
// ---------------------------------------------------------------------------------------

// out: a whole out allocation of rows of c.out_pitch(); rows < M, columns < H*V must be
// written, everything else (pitch columns, every row >= M) must keep the poison.
template <typename T>
LayoutReport check_out_layout(const Case& c, const std::vector<T>& out, T poison_value) {
  const size_t pitch = static_cast<size_t>(c.out_pitch());
  REQUIRE(out.size() % pitch == 0);
  const size_t rows = out.size() / pitch;
  REQUIRE(rows >= static_cast<size_t>(c.M));
  Findings unwritten, clobbered;
  parallel_for(rows, [&](size_t b, size_t e, unsigned) {
    size_t nu = 0, nc = 0;
    for (size_t r = b; r < e; ++r) {
      const T* row = out.data() + r * pitch;
      for (size_t col = 0; col < pitch; ++col) {
        const bool must_write = r < static_cast<size_t>(c.M) && col < static_cast<size_t>(c.cols());
        const bool is_poison = row[col] == poison_value;
        if (must_write && is_poison) {
          if (nu++ < 3) unwritten.add("not written: out[m=" + std::to_string(r) + ", col=" + std::to_string(col) + "]");
        } else if (!must_write && !is_poison) {
          if (nc++ < 3) {
            std::ostringstream o;
            o << "written outside the view: out[m=" << r << ", col=" << col << "] = 0x" << std::hex
              << static_cast<unsigned>(row[col]) << (r >= static_cast<size_t>(c.M) ? " (row >= M)" : " (pitch column)");
            clobbered.add(o.str());
          }
        }
      }
    }
    if (nu > 3) unwritten.add_count(nu - 3);
    if (nc > 3) clobbered.add_count(nc - 3);
  });
  LayoutReport l;
  l.unwritten = unwritten.count();
  l.clobbered = clobbered.count();
  l.examples = unwritten.str() + clobbered.str();
  return l;
}

// out: the bf16 out allocation; cub: dense [H, M, V] cuBLAS result (empty: no cuBLAS
// comparison); ref: dense [M, H*V] doubles.
AccuracyReport check_accuracy(const Case& c, const std::vector<uint16_t>& out, const std::vector<uint16_t>& cub,
                              const std::vector<double>& ref) {
  const size_t rows = static_cast<size_t>(c.M) * c.H;
  const size_t pitch = static_cast<size_t>(c.out_pitch());
  REQUIRE(out.size() >= static_cast<size_t>(c.M) * pitch);
  REQUIRE(ref.size() == c.ref_elems());
  const bool with_cublas = !cub.empty();
  if (with_cublas) REQUIRE(cub.size() == c.ref_elems());
  const unsigned slots = hardware_threads() + 1;
  std::vector<double> es(slots, 0.0), ec(slots, 0.0), rn(slots, 0.0);
  Findings nonfinite;
  parallel_for(rows, [&](size_t b, size_t e, unsigned chunk) {
    double s2 = 0, c2 = 0, r2 = 0;
    size_t nn = 0;
    for (size_t mh = b; mh < e; ++mh) {
      const size_t m = mh / c.H, h = mh % c.H;
      const uint16_t* orow = out.data() + m * pitch + h * c.V;
      const double* rrow = ref.data() + mh * c.V;  // m*H*V + h*V
      const uint16_t* crow = with_cublas ? cub.data() + (h * c.M + m) * c.V : nullptr;
      for (int v = 0; v < c.V; ++v) {
        const double r = rrow[v];
        const double x = bf16_to_float(orow[v]);
        if (!std::isfinite(x) && nn++ < 3) {
          std::ostringstream o;
          o << "non-finite out[m=" << m << ", h=" << h << ", v=" << v << "] = 0x" << std::hex << orow[v];
          nonfinite.add(o.str());
        }
        s2 += (x - r) * (x - r);
        r2 += r * r;
        if (with_cublas) {
          const double y = bf16_to_float(crow[v]);
          c2 += (y - r) * (y - r);
        }
      }
    }
    es[chunk] += s2;
    ec[chunk] += c2;
    rn[chunk] += r2;
    if (nn > 3) nonfinite.add_count(nn - 3);
  });
  AccuracyReport a = accuracy_from_sums(es, ec, rn);
  a.nonfinite = nonfinite.count();
  a.rope_mismatch = 0;  // no RoPE part in this op
  a.examples = nonfinite.str();
  return a;
}

// out8: the e4m3 out allocation; out16: the bf16 out allocation of a bf16-output plan on the
// same inputs.  Every used element must be table[its bf16 result] (table = e4m3_table(scale)).
E4m3Report check_e4m3_out(const Case& c, const std::vector<uint8_t>& out8, const std::vector<uint16_t>& out16,
                          float scale, const std::vector<uint8_t>& table, const std::vector<uint8_t>* other_table) {
  const size_t pitch = static_cast<size_t>(c.out_pitch());
  REQUIRE(out8.size() >= static_cast<size_t>(c.M) * pitch);
  REQUIRE(out16.size() >= static_cast<size_t>(c.M) * pitch);
  Findings mism;
  std::vector<size_t> diff(hardware_threads() + 1, 0);
  parallel_for(static_cast<size_t>(c.M), [&](size_t b, size_t e, unsigned chunk) {
    size_t nm = 0, nd = 0;
    for (size_t m = b; m < e; ++m) {
      for (int col = 0; col < c.cols(); ++col) {
        const uint16_t src = out16[m * pitch + col];
        const uint8_t want = table[src], got = out8[m * pitch + col];
        if (other_table != nullptr && (*other_table)[src] != want) ++nd;
        if (got != want && nm++ < 3) {
          std::ostringstream o;
          o << "e4m3 out[m=" << m << ", col=" << col << "] = 0x" << std::hex << static_cast<unsigned>(got) << ", want 0x"
            << static_cast<unsigned>(want) << " = quantize(bf16 0x" << src << " = " << std::dec << bf16_to_float(src)
            << ", out_scale " << scale << ")";
          mism.add(o.str());
        }
      }
    }
    if (nm > 3) mism.add_count(nm - 3);
    diff[chunk] += nd;
  });
  E4m3Report r;
  r.mismatch = mism.count();
  for (size_t d : diff) r.differs_from_other_scale += d;
  r.examples = mism.str();
  return r;
}

template <typename T>
bool all_poison(const std::vector<T>& v, T poison_value) {
  return std::all_of(v.begin(), v.end(), [&](T x) { return x == poison_value; });
}

std::vector<double> reference(const Case& c, const std::vector<uint16_t>& o, const HostWeights& w) {
  REQUIRE(o.size() >= c.o_elems());
  REQUIRE(w.wd.size() == static_cast<size_t>(c.H) * c.V * kL);
  std::vector<double> ref(c.ref_elems());
  reference_mla_oproj(c.H, c.M, kL, c.V, o.data(), c.o_stride_m(), c.o_stride_h(), w.wd.data(),
                      static_cast<int64_t>(c.V) * kL, kL, ref.data());
  return ref;
}

void record(spark_weight_format f, const Case& c, const AccuracyReport& acc) {
  ++g_summary.cases;
  g_summary.max_rel_spark = std::max(g_summary.max_rel_spark, acc.rel_spark);
  g_summary.max_rel_cublas = std::max(g_summary.max_rel_cublas, acc.rel_cublas);
  if (acc.err_cublas > 0) g_summary.max_ratio = std::max(g_summary.max_ratio, acc.err_spark / acc.err_cublas);
  std::printf("  %-9s %-62s rel err spark %.3e cublas %.3e (ratio %.4f)\n", weights_name(f), case_str(c).c_str(),
              acc.rel_spark, acc.rel_cublas, acc.err_cublas > 0 ? acc.err_spark / acc.err_cublas : 0.0);
  std::fflush(stdout);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// 1. Every plan of the suite, created in parallel.  Kernels stay loaded in the context after
//    a plan is destroyed, so the cases below create their plans at once.
// ---------------------------------------------------------------------------------------

TEST_CASE("mla_oproj: plans for every shape of the suite (created in parallel)") {
  struct Job {
    int H, V;
    spark_weight_format f;
    spark_dtype d;
    spark_status status;
    std::string msg;
  };
  std::vector<Job> jobs;
  for (const HeadsV& s : kShapes)
    for (spark_weight_format f : kFormats)
      for (spark_dtype d : {SPARK_DTYPE_BF16, SPARK_DTYPE_E4M3})
        jobs.push_back({s.H, s.V, f, d, SPARK_ERROR_INTERNAL, ""});
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
      Job& j = jobs[i];
      const spark_mla_oproj_desc desc = oproj_desc(j.H, j.V, j.f, j.d);
      const spark_mla_qproj_plan_options opts = plan_options(kOMaxM, 0);
      spark_mla_oproj_plan p = nullptr;
      j.status = spark_mla_oproj_plan_create(g_ctx, &desc, &opts, &p);
      j.msg = spark_last_error();
      spark_mla_oproj_plan_destroy(p);
    }
  };
  const size_t nthreads = std::min<size_t>(jobs.size(), hardware_threads());
  std::vector<std::thread> pool;
  for (size_t i = 0; i < nthreads; ++i) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  %zu oproj plans (max_m %d) created on %zu threads in %.1f s\n", jobs.size(), kOMaxM, nthreads, secs);
  std::fflush(stdout);
  for (const Job& j : jobs)
    CHECK_MESSAGE(j.status == SPARK_SUCCESS, "plan_create H=" << j.H << " V=" << j.V << " weights="
                                                              << cstr(weights_name(j.f)) << " dtype="
                                                              << cstr(dtype_name(j.d)) << " -> "
                                                              << cstr(spark_status_string(j.status)) << " ("
                                                              << static_cast<int>(j.status) << "): " << j.msg);
}

// ---------------------------------------------------------------------------------------
// 2. Accuracy over H x V x M, each weight format, bf16 and e4m3 out.
// ---------------------------------------------------------------------------------------

namespace {

// The o layouts and out pitches cycle over a shape's M list, so each kernel meets all three o
// layouts and both out alignments the contract allows.
constexpr OLayout kOLayouts[] = {OLayout::kTokenPadded, OLayout::kTokenDense, OLayout::kHeadMajor};

void run_accuracy(spark_weight_format f, int H, int V, const std::vector<int>& Ms) {
  OPlan p16 = make_oplan(H, V, f, SPARK_DTYPE_BF16, kOMaxM);
  OPlan p8 = make_oplan(H, V, f, SPARK_DTYPE_E4M3, kOMaxM);
  Stream stream;
  CUDA_REQUIRE(stream.create());
  const cudaStream_t st = stream.get();
  const int max_m = *std::max_element(Ms.begin(), Ms.end());
  REQUIRE(max_m <= kOMaxM);

  DeviceWeights dw;
  DeviceBuffer d_wd, d_c, d_scale;
  DEVICE_ALLOC(d_wd, static_cast<size_t>(H) * V * kL * 2);
  DEVICE_ALLOC(d_c, static_cast<size_t>(H) * max_m * V * 2);
  DEVICE_ALLOC(d_scale, sizeof(float));
  std::vector<uint16_t> out1, out2, cub;
  std::vector<uint8_t> out8;

  for (size_t i = 0; i < Ms.size(); ++i) {
    Case c;
    c.H = H;
    c.V = V;
    c.M = Ms[i];
    c.o_layout = kOLayouts[i % 3];
    c.pitched = i % 2 == 1;
    const uint64_t seed = next_seed();
    const float scale = kScales[g_summary.cases % kNumScales];
    INFO("weights=" << cstr(weights_name(f)) << " " << case_str(c) << " seed=" << seed << " out_scale=" << scale);

    // Fresh inputs; per-case o and out buffers of exactly their layouts' sizes.
    const std::vector<uint16_t> o = random_o(c, seed);
    const HostWeights w = random_weights(f, H, V, mix64(seed ^ 0x3AF8ull));
    DeviceBuffer d_o, d_out, d_out8;
    DEVICE_ALLOC(d_o, o.size() * 2);
    DEVICE_ALLOC(d_out, c.out_elems() * 2);
    DEVICE_ALLOC(d_out8, c.out_elems());
    upload(d_o.get(), o.data(), o.size() * 2, st);
    upload_weights(dw, w, st);
    upload(d_wd.get(), w.wd.data(), w.wd.size() * 2, st);
    const std::vector<double> ref = reference(c, o, w);

    // bf16 output: accuracy against float64 and cuBLAS, poison layout, determinism.
    AccuracyReport acc;
    {
      INFO("dtype=bf16");
      const spark_mla_oproj_args a = oproj_args(c, d_o.get(), dw, d_out.get(), nullptr);
      run_oproj(p16.get(), a, d_out, st, out1);
      run_cublas_oproj(c, d_o.get(), d_wd, d_c, st, cub);
      require_layout(check_out_layout<uint16_t>(c, out1, kPoisonBf16));
      acc = check_accuracy(c, out1, cub, ref);
      require_accuracy(acc, true);
      run_oproj(p16.get(), a, d_out, st, out2);
      const size_t ndiff = count_differences(out1, out2);
      INFO("determinism: " << ndiff << " elements differ between two runs");
      CHECK(ndiff == 0);
    }

    // e4m3 output on the same inputs: bitwise quantize_e4m3(own bf16 result, out_scale).
    {
      INFO("dtype=e4m3");
      set_q_scale(d_scale, scale, st);
      const spark_mla_oproj_args a = oproj_args(c, d_o.get(), dw, d_out8.get(), d_scale.as<float>());
      run_oproj(p8.get(), a, d_out8, st, out8);
      require_layout(check_out_layout<uint8_t>(c, out8, kPoisonE4m3));
      const E4m3Report r = check_e4m3_out(c, out8, out1, scale, e4m3_table(scale), nullptr);
      INFO(r.mismatch << " e4m3 elements differ from the rule" << r.examples);
      CHECK(r.mismatch == 0);
    }
    record(f, c, acc);
  }
}

// One M per built-in M-regime or more (1100: the 1024-8192 regime, within kOMaxM).
#define SPARK_MS_FULL 1, 3, 16, 17, 64, 100, 200, 300, 600, 1100
#define SPARK_MS_ODD_HEADS 1, 3, 17, 64
// 32 (head, 128 columns) blocks: the decode regimes' boundary, where their tiles differ.
#define SPARK_MS_DECODE_SPLIT 1, 8, 9, 16, 17
// Many heads: the float64 reference is the slow part; one M per M-regime up to 512.
#define SPARK_MS_MANY_HEADS 1, 16, 17, 64, 100, 200, 300

}  // namespace

// The three weight formats of one (H, V) and M list, run and named.
#define SPARK_OPROJ_SHAPE_CASES(H, V, MS)                                                                     \
  TEST_CASE("mla_oproj bf16 weights: H=" #H " V=" #V ", M in {" SPARK_TEST_STR(MS) "}, bf16 + e4m3 out") {  \
    run_accuracy(SPARK_WEIGHTS_BF16, H, V, std::vector<int>{MS});                                             \
  }                                                                                                           \
  TEST_CASE("mla_oproj mxfp8 weights: H=" #H " V=" #V ", M in {" SPARK_TEST_STR(MS) "}, bf16 + e4m3 out") { \
    run_accuracy(SPARK_WEIGHTS_MXFP8, H, V, std::vector<int>{MS});                                            \
  }                                                                                                           \
  TEST_CASE("mla_oproj fp8-block weights: H=" #H " V=" #V ", M in {" SPARK_TEST_STR(MS)                       \
            "}, bf16 + e4m3 out") {                                                                           \
    run_accuracy(SPARK_WEIGHTS_FP8_BLOCK128, H, V, std::vector<int>{MS});                                     \
  }

// kShapes, in order.
SPARK_OPROJ_SHAPE_CASES(1, 128, SPARK_MS_FULL)
SPARK_OPROJ_SHAPE_CASES(8, 256, SPARK_MS_FULL)
SPARK_OPROJ_SHAPE_CASES(16, 128, SPARK_MS_FULL)
SPARK_OPROJ_SHAPE_CASES(11, 256, SPARK_MS_ODD_HEADS)
SPARK_OPROJ_SHAPE_CASES(16, 256, SPARK_MS_DECODE_SPLIT)
SPARK_OPROJ_SHAPE_CASES(64, 256, SPARK_MS_MANY_HEADS)
SPARK_OPROJ_SHAPE_CASES(128, 128, SPARK_MS_MANY_HEADS)

// ---------------------------------------------------------------------------------------
// 3. The effective weights, bitwise: one-hot o.
// ---------------------------------------------------------------------------------------

namespace {

struct IdentityResult {
  size_t rows = 0;            // rows run, over all runs
  size_t checked = 0;         // elements compared bitwise
  size_t zero_sign = 0;       // ref +-0, out -+0 (1 * w + 0 * w' can turn -0 into +0): accepted
  size_t subnormal_refs = 0;  // bf16-subnormal references among the checked
  size_t mismatches = 0;
  size_t nan_expected = 0;  // elements of NaN columns
  size_t nan_missing = 0;
  std::string examples;
};

// With o row (row0 + m) = e_l, out[m, h*V + v] must be exactly w.wd(h, v, l), over runs of the
// whole L rows and of 16- and 64-row windows (every M-regime dequantises every weight).  A column
// (h, v) holding a NaN anywhere along L must be NaN in every row: 0 * NaN = NaN.  describe(h, v, l)
// says what the weight is made of, for the examples.
IdentityResult run_identity(const HostWeights& w, const std::function<std::string(int, int, int)>& describe) {
  const int H = w.H, V = w.V;
  OPlan plan = make_oplan(H, V, w.format, SPARK_DTYPE_BF16, 2 * kL);
  Stream stream;
  CUDA_REQUIRE(stream.create());
  const cudaStream_t st = stream.get();

  Case full;
  full.H = H;
  full.V = V;
  full.M = 2 * kL;  // twice through L: M = 1024 reaches the 1024-8192 regime's kernel
  full.o_layout = OLayout::kTokenPadded;
  full.pitched = true;
  const std::vector<uint16_t> o = identity_o(full);
  DeviceWeights dw;
  upload_weights(dw, w, st);
  DeviceBuffer d_o, d_out;
  DEVICE_ALLOC(d_o, o.size() * 2);
  DEVICE_ALLOC(d_out, full.out_elems() * 2);
  upload(d_o.get(), o.data(), o.size() * 2, st);

  std::vector<char> nan_col(static_cast<size_t>(H) * V, 0);
  for (size_t hv = 0; hv < nan_col.size(); ++hv)
    for (int l = 0; l < kL; ++l)
      if (bf16_is_nan(w.wd[hv * kL + l])) nan_col[hv] = 1;

  std::vector<std::pair<int, int>> runs = {{2 * kL, 0}, {kL, 0}};  // (M, first o row)
  for (int r = 0; r + 16 <= kL; r += 16) runs.emplace_back(16, r);
  for (int r = 0; r + 64 <= kL; r += 64) runs.emplace_back(64, r);

  IdentityResult res;
  auto where = [](int m, int l, int h, int v, uint16_t got, uint16_t want) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "\n    out[m=%d (o row e_%d), h=%d, v=%d] = 0x%04X, want 0x%04X: ", m, l, h, v, got,
                  want);
    return std::string(buf);
  };
  std::vector<uint16_t> out;
  const size_t pitch = static_cast<size_t>(full.out_pitch());
  for (const auto& run : runs) {
    const int M = run.first, row0 = run.second;
    INFO("run M=" << M << " from o row " << row0);
    Case c = full;
    c.M = M;
    run_oproj(plan.get(), oproj_args(c, d_o.get(), dw, d_out.get(), nullptr, row0), d_out, st, out);
    // The allocation holds 2L rows and the sentinel rows: every row from M on is a sentinel.
    require_layout(check_out_layout<uint16_t>(c, out, kPoisonBf16));
    for (int m = 0; m < M; ++m)
      for (int h = 0; h < H; ++h)
        for (int v = 0; v < V; ++v) {
          const int l = (row0 + m) % kL;
          const size_t hv = static_cast<size_t>(h) * V + v;
          const uint16_t got = out[static_cast<size_t>(m) * pitch + hv], want = w.wd[hv * kL + l];
          if (nan_col[hv]) {
            ++res.nan_expected;
            if (!bf16_is_nan(got) && res.nan_missing++ < 8) res.examples += where(m, l, h, v, got, want) + "NaN column";
            continue;
          }
          ++res.checked;
          const bool subnormal = (want & 0x7F80u) == 0 && (want & 0x7Fu) != 0;
          res.subnormal_refs += subnormal;
          if (got == want) continue;
          if ((got & 0x7FFFu) == 0 && (want & 0x7FFFu) == 0) {
            ++res.zero_sign;
            continue;
          }
          if (res.mismatches++ < 8)
            res.examples += where(m, l, h, v, got, want) + describe(h, v, l) + (subnormal ? " (a bf16 subnormal)" : "");
        }
    res.rows += static_cast<size_t>(M);
  }
  return res;
}

// Scale bytes up to 134 are those whose power of two 2^(byte - 127) times the largest e4m3
// value stays far inside bf16, which a kernel may dequantise without floats; low_bytes folds
// bytes 135..246 of the exhaustive fill onto 23..134, so every group lies in that range (the
// full-coverage bytes 240..246 become 128..134, each still paired with every code).
void run_mx_identity(int H, int V, bool with_nans, bool low_bytes = false) {
  const uint64_t seed = next_seed();
  INFO("mxfp8 identity H=" << H << " V=" << V << (low_bytes ? " (scale bytes 0..134)" : "") << " seed=" << seed);
  MxWeights m(server_mx_layout(H, V));
  REQUIRE(fill_mx_exhaustive(m, mix64(seed ^ 0x1DE47ull)));

  // The generator's own coverage, so a pass means what it claims.
  REQUIRE(mx_coverage_gaps(m) == "");
  if (low_bytes) {
    for (int h = 0; h < m.H(); ++h)
      for (int k = 0; k < m.K(); ++k)
        for (int j = 0; j < MxWeights::kGroups; ++j)
          if (m.scale(h, k, j) > 134) m.scale(h, k, j) = static_cast<uint8_t>(m.scale(h, k, j) - 112);
    const MxCoverage cov = mx_coverage(m);
    for (int b = 0; b < 256; ++b) {
      INFO("scale byte " << b);
      CHECK((cov.scale_count[b] > 0) == (b <= 134));
    }
    for (int b = 128; b <= 134; ++b) CHECK(cov.codes_with_byte[b] == 254);
  }

  // NaN mode: scale byte 255 on group 5 of W_UV[h0, :, v0] and the NaN code 0x7F at
  // W_UV[h1, l1, v1]: two NaN columns of out.
  const int h0 = std::min(7, H - 1), v0 = V / 2 + 6, j0 = 5;
  const int h1 = std::min(2, H - 1), v1 = 20, l1 = 300;
  if (with_nans) {
    m.scale(h0, v0, j0) = 255;
    m.value(h1, v1, l1) = 0x7F;
  }
  const HostWeights w = mx_weights(m);
  const IdentityResult r = run_identity(w, [&m](int h, int v, int l) {
    char buf[120];
    std::snprintf(buf, sizeof buf, "value 0x%02X (%g) x scale byte %u", m.value(h, v, l),
                  static_cast<double>(e4m3_to_float(m.value(h, v, l))), static_cast<unsigned>(m.scale(h, v, l / 32)));
    return std::string(buf);
  });
  std::printf("  mxfp8 identity H=%-3d V=%d%s: %zu elements bitwise (%zu subnormal refs), %zu +-0 accepted, "
              "%zu mismatches, %zu NaN elements\n",
              H, V, with_nans ? " +NaN" : low_bytes ? " bytes<=134" : "", r.checked, r.subnormal_refs, r.zero_sign,
              r.mismatches, r.nan_expected);
  std::fflush(stdout);
  CHECK_MESSAGE(r.mismatches == 0,
                r.mismatches << " elements are not bitwise RN_bf16(e4m3 value x 2^(byte - 127))" << r.examples);
  CHECK(r.checked + r.nan_expected == r.rows * static_cast<size_t>(H) * V);
  if (with_nans) {
    CHECK(r.nan_expected == r.rows * 2);
    CHECK_MESSAGE(r.nan_missing == 0, r.nan_missing << " elements of NaN columns are not NaN" << r.examples);
  } else {
    CHECK(r.nan_expected == 0);
    CHECK(r.subnormal_refs > 0);
  }
  g_summary.extra_checks += 1;
}

void run_block_identity(int H, int V) {
  const uint64_t seed = next_seed();
  INFO("fp8-block identity H=" << H << " V=" << V << " (pack rows per head " << nope_for(V) + V << ") seed=" << seed);
  BlockPack bp(H, V);
  // Every non-NaN value code, uniformly.
  uint64_t s = mix64(seed ^ 0xB10Cull);
  std::vector<size_t> code_count(256, 0);
  for (int h = 0; h < H; ++h)
    for (int v = 0; v < V; ++v)
      for (int l = 0; l < kL; ++l) {
        uint8_t code;
        do {
          s = mix64(s + 1);
          code = static_cast<uint8_t>(s & 0xFF);
        } while (e4m3_is_nan(code));
        bp.value(h, v, l) = code;
        ++code_count[code];
      }
  // Scales with random mantissas, 2^-135 .. 2^101, on every block a view row lies in: products
  // from fp32 subnormals (rounded there, then to bf16) to 2^110, far from overflow.
  for (int h = 0; h < H; ++h)
    for (int v = 0; v < V; ++v)
      for (int l = 0; l < kL; l += kBlock) {
        const uint64_t r = mix64(seed ^ (static_cast<uint64_t>(bp.row(h, v) / kBlock) << 8) ^ uint64_t(l / kBlock));
        const float mantissa = 1.0f + static_cast<float>(r & 0x7FFFFF) * 0x1p-23f;
        bp.scale_of(h, v, l) = std::ldexp(mantissa, -135 + static_cast<int>((r >> 32) % 237));
      }
  bp.scale_of(0, 0, 0) = 0x1.8p-133f;                   // a block of subnormal products, certainly
  bp.scale_of(H - 1, V - 1, kL - 1) = 0x1.fffffep101f;  // and one of the largest
  size_t missing_codes = 0;
  for (int c = 0; c < 256; ++c) missing_codes += !e4m3_is_nan(static_cast<uint8_t>(c)) && code_count[c] == 0;
  REQUIRE(missing_codes == 0);

  const HostWeights w = block_weights(bp);
  const IdentityResult r = run_identity(w, [&bp](int h, int v, int l) {
    char buf[120];
    std::snprintf(buf, sizeof buf, "value 0x%02X (%g) x scale %a (packed row %lld)", bp.value(h, v, l),
                  static_cast<double>(e4m3_to_float(bp.value(h, v, l))), static_cast<double>(bp.scale_of(h, v, l)),
                  static_cast<long long>(bp.row(h, v)));
    return std::string(buf);
  });
  std::printf("  fp8-block identity H=%-3d V=%d: %zu elements bitwise (%zu subnormal refs), %zu +-0 accepted, "
              "%zu mismatches\n",
              H, V, r.checked, r.subnormal_refs, r.zero_sign, r.mismatches);
  std::fflush(stdout);
  CHECK_MESSAGE(r.mismatches == 0, r.mismatches << " elements are not bitwise RN_bf16(fp32(value x scale))" << r.examples);
  CHECK(r.nan_expected == 0);
  CHECK(r.checked == r.rows * static_cast<size_t>(H) * V);
  CHECK(r.subnormal_refs > 0);
  g_summary.extra_checks += 1;
}

}  // namespace

TEST_CASE("mxfp8 effective weights bitwise (one-hot o, all codes, scale bytes 0..246): H=1 V=128") {
  run_mx_identity(1, 128, false);
}
TEST_CASE("mxfp8 effective weights bitwise (one-hot o, all codes, scale bytes 0..246): H=11 V=256") {
  run_mx_identity(11, 256, false);
}
TEST_CASE("mxfp8 effective weights bitwise (one-hot o, all codes, scale bytes 0..134 only): H=11 V=256") {
  run_mx_identity(11, 256, false, true);
}
TEST_CASE("mxfp8 NaN scale byte 255 and NaN value code: NaN columns in every row, the rest bitwise") {
  run_mx_identity(11, 256, true);
}
TEST_CASE("fp8-block effective weights bitwise (one-hot o, all codes): H=1 V=128") { run_block_identity(1, 128); }
TEST_CASE("fp8-block effective weights bitwise (one-hot o, all codes, blocks straddle heads): H=8 V=256") {
  run_block_identity(8, 256);
}
TEST_CASE("fp8-block effective weights bitwise (one-hot o, all codes, blocks straddle heads): H=11 V=256") {
  run_block_identity(11, 256);
}

// ---------------------------------------------------------------------------------------
// 4. CUDA graph: capture once, replay with new o, weights and out_scale.
// ---------------------------------------------------------------------------------------

namespace {

void run_graph(spark_weight_format f) {
  Case c;
  c.H = 16;
  c.V = 128;
  c.M = 17;
  c.o_layout = OLayout::kTokenPadded;
  c.pitched = true;
  OPlan p16 = make_oplan(c.H, c.V, f, SPARK_DTYPE_BF16, 64);
  OPlan p8 = make_oplan(c.H, c.V, f, SPARK_DTYPE_E4M3, 64);
  Stream stream;
  CUDA_REQUIRE(stream.create());
  const cudaStream_t st = stream.get();

  const uint64_t seed1 = next_seed();
  INFO("weights=" << cstr(weights_name(f)) << " " << case_str(c) << " seed1=" << seed1);
  const std::vector<uint16_t> o1 = random_o(c, seed1);
  const HostWeights w1 = random_weights(f, c.H, c.V, mix64(seed1 ^ 0x3AF8ull));
  const float scale1 = kScales[0], scale2 = kScales[1];
  const std::vector<uint8_t> table1 = e4m3_table(scale1), table2 = e4m3_table(scale2);
  DeviceWeights dw;
  DeviceBuffer d_o, d_out, d_out8, d_scale;
  DEVICE_ALLOC(d_o, o1.size() * 2);
  DEVICE_ALLOC(d_out, c.out_elems() * 2);
  DEVICE_ALLOC(d_out8, c.out_elems());
  DEVICE_ALLOC(d_scale, sizeof(float));
  upload(d_o.get(), o1.data(), o1.size() * 2, st);
  upload_weights(dw, w1, st);
  set_q_scale(d_scale, scale1, st);
  const spark_mla_oproj_args a16 = oproj_args(c, d_o.get(), dw, d_out.get(), nullptr);
  const spark_mla_oproj_args a8 = oproj_args(c, d_o.get(), dw, d_out8.get(), d_scale.as<float>());

  // Both runs captured into one graph: one kernel node each, nothing run while capturing.
  Graph g;
  {
    poison(d_out, st);
    poison(d_out8, st);
    CUDA_REQUIRE(cudaStreamSynchronize(st));
    CUDA_REQUIRE(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    const spark_status r16 = spark_mla_oproj_run(p16.get(), &a16, stream.spark());
    const std::string e16 = spark_last_error();
    const spark_status r8 = spark_mla_oproj_run(p8.get(), &a8, stream.spark());
    const std::string e8 = spark_last_error();
    const cudaError_t end = cudaStreamEndCapture(st, &g.graph);
    INFO("bf16 run while capturing: " << cstr(spark_status_string(r16)) << ": " << e16);
    INFO("e4m3 run while capturing: " << cstr(spark_status_string(r8)) << ": " << e8);
    REQUIRE(r16 == SPARK_SUCCESS);
    REQUIRE(r8 == SPARK_SUCCESS);
    REQUIRE_MESSAGE(end == cudaSuccess, "cudaStreamEndCapture -> " << cstr(cudaGetErrorName(end)));
    size_t nodes = 0;
    CUDA_REQUIRE(cudaGraphGetNodes(g.graph, nullptr, &nodes));
    CHECK_MESSAGE(nodes == 2, "each run should be exactly one kernel launch; graph has " << nodes << " nodes");
    CUDA_REQUIRE(cudaGraphInstantiate(&g.exec, g.graph, 0));
    std::vector<uint16_t> o16;
    download(o16, d_out.get(), d_out.bytes() / 2, st);
    CHECK(all_poison(o16, kPoisonBf16));
  }
  auto replay = [&](std::vector<uint16_t>& o16, std::vector<uint8_t>& o8) {
    poison(d_out, st);
    poison(d_out8, st);
    CUDA_REQUIRE(cudaGraphLaunch(g.exec, st));
    CUDA_REQUIRE(cudaStreamSynchronize(st));
    download(o16, d_out.get(), d_out.bytes() / 2, st);
    download(o8, d_out8.get(), d_out8.bytes(), st);
  };
  auto eager = [&](std::vector<uint16_t>& o16, std::vector<uint8_t>& o8) {
    run_oproj(p16.get(), a16, d_out, st, o16);
    run_oproj(p8.get(), a8, d_out8, st, o8);
  };
  auto verify = [&](const char* what, const std::vector<uint16_t>& o, const HostWeights& w, float scale,
                    const std::vector<uint8_t>& table, const std::vector<uint8_t>& other_table,
                    const std::vector<uint16_t>& o16, const std::vector<uint8_t>& o8) {
    INFO(cstr(what) << " (out_scale " << scale << ")");
    require_layout(check_out_layout<uint16_t>(c, o16, kPoisonBf16));
    require_layout(check_out_layout<uint8_t>(c, o8, kPoisonE4m3));
    require_accuracy(check_accuracy(c, o16, {}, reference(c, o, w)), false);
    const E4m3Report r = check_e4m3_out(c, o8, o16, scale, table, &other_table);
    INFO(r.mismatch << " e4m3 elements differ from the rule" << r.examples);
    CHECK(r.mismatch == 0);
    // The two scales give different codes somewhere, so matching proves the scale read.
    CHECK(r.differs_from_other_scale > 0);
  };

  std::vector<uint16_t> g16a, e16a, g16b, e16b;
  std::vector<uint8_t> g8a, e8a, g8b, e8b;
  replay(g16a, g8a);
  eager(e16a, e8a);
  CHECK(count_differences(g16a, e16a) == 0);
  CHECK(count_differences(g8a, e8a) == 0);
  verify("replay 1", o1, w1, scale1, table1, table2, g16a, g8a);

  // New contents in the same device buffers: o, the weights (and their scales), out_scale.
  const uint64_t seed2 = next_seed();
  INFO("seed2=" << seed2);
  const std::vector<uint16_t> o2 = random_o(c, seed2);
  const HostWeights w2 = random_weights(f, c.H, c.V, mix64(seed2 ^ 0x3AF8ull));
  upload(d_o.get(), o2.data(), o2.size() * 2, st);
  upload_weights(dw, w2, st);
  set_q_scale(d_scale, scale2, st);
  replay(g16b, g8b);
  eager(e16b, e8b);
  CHECK(count_differences(g16b, e16b) == 0);
  CHECK(count_differences(g8b, e8b) == 0);
  CHECK(count_differences(g16a, g16b) > 0);  // the replay saw the new contents
  verify("replay 2", o2, w2, scale2, table2, table1, g16b, g8b);
  g_summary.extra_checks += 1;
}

}  // namespace

TEST_CASE("CUDA graph capture and replay follow new contents of o, W_UV and out_scale: bf16 weights") {
  run_graph(SPARK_WEIGHTS_BF16);
}
TEST_CASE("CUDA graph capture and replay follow new contents of o, W_UV, its scales and out_scale: mxfp8 weights") {
  run_graph(SPARK_WEIGHTS_MXFP8);
}
TEST_CASE("CUDA graph capture and replay follow new contents of o, W_UV, its scales and out_scale: fp8-block weights") {
  run_graph(SPARK_WEIGHTS_FP8_BLOCK128);
}

// ---------------------------------------------------------------------------------------
// 5. Programmatic dependent launch: the attention kernel that writes o runs just before.
// ---------------------------------------------------------------------------------------

TEST_CASE("PDL plan: same bits as a plain plan, and sees the o written by the previous kernel") {
  Case c;
  c.H = 16;
  c.V = 128;
  c.M = 64;
  c.o_layout = OLayout::kTokenPadded;
  c.pitched = false;
  OPlan plain16 = make_oplan(c.H, c.V, SPARK_WEIGHTS_BF16, SPARK_DTYPE_BF16, 64);
  OPlan plain8 = make_oplan(c.H, c.V, SPARK_WEIGHTS_BF16, SPARK_DTYPE_E4M3, 64);
  OPlan pdl16 = make_oplan(c.H, c.V, SPARK_WEIGHTS_BF16, SPARK_DTYPE_BF16, 64, /*pdl=*/1);
  OPlan pdl8 = make_oplan(c.H, c.V, SPARK_WEIGHTS_BF16, SPARK_DTYPE_E4M3, 64, /*pdl=*/1);
  Stream stream;
  CUDA_REQUIRE(stream.create());
  const cudaStream_t st = stream.get();

  const uint64_t seed = next_seed();
  INFO(case_str(c) << " seed=" << seed);
  const std::vector<uint16_t> o[2] = {random_o(c, seed), random_o(c, mix64(seed))};
  const HostWeights w = random_weights(SPARK_WEIGHTS_BF16, c.H, c.V, mix64(seed ^ 0x3AF8ull));
  DeviceWeights dw;
  upload_weights(dw, w, st);
  DeviceBuffer d_o, d_src[2], d_out, d_out8, d_scale;
  DEVICE_ALLOC(d_o, c.o_elems() * 2);
  for (int i = 0; i < 2; ++i) {
    DEVICE_ALLOC(d_src[i], c.o_elems() * 2);
    upload(d_src[i].get(), o[i].data(), o[i].size() * 2, st);
  }
  DEVICE_ALLOC(d_out, c.out_elems() * 2);
  DEVICE_ALLOC(d_out8, c.out_elems());
  DEVICE_ALLOC(d_scale, sizeof(float));
  set_q_scale(d_scale, kScales[0], st);
  const spark_mla_oproj_args a16 = oproj_args(c, d_o.get(), dw, d_out.get(), nullptr);
  const spark_mla_oproj_args a8 = oproj_args(c, d_o.get(), dw, d_out8.get(), d_scale.as<float>());

  // Expected outputs from the plain plans.
  std::vector<uint16_t> want16[2];
  std::vector<uint8_t> want8[2];
  for (int i = 0; i < 2; ++i) {
    CUDA_REQUIRE(cudaMemcpyAsync(d_o.get(), d_src[i].get(), d_o.bytes(), cudaMemcpyDeviceToDevice, st));
    run_oproj(plain16.get(), a16, d_out, st, want16[i]);
    run_oproj(plain8.get(), a8, d_out8, st, want8[i]);
  }
  CHECK(count_differences(want16[0], want16[1]) > 0);

  // Each PDL run directly follows a kernel (cublasScopy, a bitwise copy) that writes o.
  REQUIRE(c.o_elems() % 2 == 0);
  const int copy_floats = static_cast<int>(c.o_elems() / 2);
  CUBLAS_REQUIRE(cublasSetStream(g_cublas, st));
  std::vector<uint16_t> got16;
  std::vector<uint8_t> got8;
  for (int iter = 0; iter < 6; ++iter) {
    const int i = iter % 2;
    INFO("iteration " << iter << ": bf16 out of o contents " << i << ", e4m3 out of o contents " << 1 - i);
    poison(d_out, st);
    poison(d_out8, st);
    CUBLAS_REQUIRE(cublasScopy(g_cublas, copy_floats, d_src[i].as<float>(), 1, d_o.as<float>(), 1));
    SPARK_REQUIRE(spark_mla_oproj_run(pdl16.get(), &a16, stream.spark()));
    CUBLAS_REQUIRE(cublasScopy(g_cublas, copy_floats, d_src[1 - i].as<float>(), 1, d_o.as<float>(), 1));
    SPARK_REQUIRE(spark_mla_oproj_run(pdl8.get(), &a8, stream.spark()));
    CUDA_REQUIRE(cudaStreamSynchronize(st));
    download(got16, d_out.get(), d_out.bytes() / 2, st);
    download(got8, d_out8.get(), d_out8.bytes(), st);
    CHECK(count_differences(got16, want16[i]) == 0);
    CHECK(count_differences(got8, want8[1 - i]) == 0);
  }
  g_summary.extra_checks += 1;
}

// ---------------------------------------------------------------------------------------
// 6. Argument errors at run time: a status, a message naming the argument, nothing written.
// ---------------------------------------------------------------------------------------

namespace {

// plan_rule: the call breaks only the plan's own max_m, which spark_mla_oproj_can_implement
// cannot know; every other bad call must be refused by it too, naming the same argument.
void expect_refused(spark_mla_oproj_plan plan, const spark_mla_oproj_desc& desc, const spark_mla_oproj_args& a,
                    cudaStream_t st, const char* what, const char* arg_name, bool plan_rule = false) {
  const spark_status r = spark_mla_oproj_run(plan, &a, reinterpret_cast<spark_stream>(st));
  const std::string msg = spark_last_error();
  INFO(cstr(what) << ": run -> " << cstr(spark_status_string(r)) << " (" << int(r) << "): \"" << msg << "\"");
  CHECK(r == SPARK_ERROR_INVALID_ARGUMENT);
  CHECK(!msg.empty());
  if (arg_name != nullptr) CHECK(names_word(msg, arg_name));
  if (plan_rule) return;
  const spark_status ci = spark_mla_oproj_can_implement(&desc, &a);
  const std::string cmsg = spark_last_error();
  INFO("can_implement -> " << cstr(spark_status_string(ci)) << " (" << int(ci) << "): \"" << cmsg << "\"");
  CHECK(ci == SPARK_ERROR_INVALID_ARGUMENT);
  if (arg_name != nullptr) CHECK(names_word(cmsg, arg_name));
}

}  // namespace

TEST_CASE("run rejects bad arguments with a message naming the argument, and writes nothing") {
  const int max_m = 64;
  Case c;
  c.H = 16;
  c.V = 128;
  c.M = 16;
  c.o_layout = OLayout::kTokenPadded;
  c.pitched = true;
  // o and out are allocated for max_m + 1 rows, so a call wrongly accepted stays inside them.
  Case c_max = c;
  c_max.M = max_m + 1;
  const spark_mla_oproj_desc d16 = oproj_desc(c.H, c.V, SPARK_WEIGHTS_BF16, SPARK_DTYPE_BF16);
  const spark_mla_oproj_desc d8 = oproj_desc(c.H, c.V, SPARK_WEIGHTS_BF16, SPARK_DTYPE_E4M3);
  const spark_mla_oproj_desc dmx = oproj_desc(c.H, c.V, SPARK_WEIGHTS_MXFP8, SPARK_DTYPE_BF16);
  const spark_mla_oproj_desc dblk = oproj_desc(c.H, c.V, SPARK_WEIGHTS_FP8_BLOCK128, SPARK_DTYPE_BF16);
  OPlan p16 = make_oplan(c.H, c.V, SPARK_WEIGHTS_BF16, SPARK_DTYPE_BF16, max_m);
  OPlan p8 = make_oplan(c.H, c.V, SPARK_WEIGHTS_BF16, SPARK_DTYPE_E4M3, max_m);
  OPlan pmx = make_oplan(c.H, c.V, SPARK_WEIGHTS_MXFP8, SPARK_DTYPE_BF16, max_m);
  OPlan pblk = make_oplan(c.H, c.V, SPARK_WEIGHTS_FP8_BLOCK128, SPARK_DTYPE_BF16, max_m);
  Stream stream;
  CUDA_REQUIRE(stream.create());
  const cudaStream_t st = stream.get();

  const uint64_t seed = next_seed();
  INFO(case_str(c) << " seed=" << seed);
  const std::vector<uint16_t> o = random_o(c_max, seed);
  const HostWeights wb = random_weights(SPARK_WEIGHTS_BF16, c.H, c.V, mix64(seed ^ 1));
  const HostWeights wm = random_weights(SPARK_WEIGHTS_MXFP8, c.H, c.V, mix64(seed ^ 2));
  const HostWeights wk = random_weights(SPARK_WEIGHTS_FP8_BLOCK128, c.H, c.V, mix64(seed ^ 3));
  DeviceWeights db, dm, dk;
  upload_weights(db, wb, st);
  upload_weights(dm, wm, st);
  upload_weights(dk, wk, st);
  DeviceBuffer d_o, d_out, d_out8, d_scale;
  DEVICE_ALLOC(d_o, o.size() * 2);
  REQUIRE(d_o.bytes() >= c.out_elems() * 2);  // the overlap case puts an out view into o
  DEVICE_ALLOC(d_out, c_max.out_elems() * 2);
  DEVICE_ALLOC(d_out8, c_max.out_elems());
  DEVICE_ALLOC(d_scale, sizeof(float));
  upload(d_o.get(), o.data(), o.size() * 2, st);
  set_q_scale(d_scale, kScales[0], st);
  poison(d_out, st);
  poison(d_out8, st);
  CUDA_REQUIRE(cudaStreamSynchronize(st));

  const spark_mla_oproj_args ok16 = oproj_args(c, d_o.get(), db, d_out.get(), nullptr);
  const spark_mla_oproj_args ok8 = oproj_args(c, d_o.get(), db, d_out8.get(), d_scale.as<float>());
  const spark_mla_oproj_args okmx = oproj_args(c, d_o.get(), dm, d_out.get(), nullptr);
  const spark_mla_oproj_args okblk = oproj_args(c, d_o.get(), dk, d_out.get(), nullptr);
  // The valid calls pass the host check (so each refusal below is the one change's doing).
  SPARK_REQUIRE(spark_mla_oproj_can_implement(&d16, &ok16));
  SPARK_REQUIRE(spark_mla_oproj_can_implement(&d8, &ok8));
  SPARK_REQUIRE(spark_mla_oproj_can_implement(&dmx, &okmx));
  SPARK_REQUIRE(spark_mla_oproj_can_implement(&dblk, &okblk));

  const int64_t L = kL, HV = c.cols();
  spark_mla_oproj_args a = ok16;
  a.m = max_m + 1;
  expect_refused(p16.get(), d16, a, st, "bf16 out, m = max_m + 1", "m", /*plan_rule=*/true);
  a = ok8;
  a.m = max_m + 1;
  expect_refused(p8.get(), d8, a, st, "e4m3 out, m = max_m + 1", "m", /*plan_rule=*/true);
  a = ok16;
  a.m = 0;
  expect_refused(p16.get(), d16, a, st, "m = 0", "m");
  a = ok16;
  a.out = nullptr;
  expect_refused(p16.get(), d16, a, st, "out NULL", "out");
  a = ok16;
  a.o = nullptr;
  expect_refused(p16.get(), d16, a, st, "o NULL", "o");
  a = ok16;
  a.o = d_o.as<const uint16_t>() + 1;  // 2-byte aligned only
  expect_refused(p16.get(), d16, a, st, "o + 1 element (not 16-byte aligned)", "o");
  a = ok16;
  a.o_stride_h = 0;
  expect_refused(p16.get(), d16, a, st, "o_stride_h = 0", "o_stride_h");
  a = ok16;
  a.o_stride_m = static_cast<int64_t>(c.H) * L + 4;
  expect_refused(p16.get(), d16, a, st, "o_stride_m = H*L + 4 (not a multiple of 8)", "o_stride_m");
  a = ok16;
  a.w_stride_v = L - 8;
  expect_refused(p16.get(), d16, a, st, "w_stride_v = L - 8 (rows overlap)", "w_stride_v");
  a = ok16;
  a.out_stride_m = HV - 8;
  expect_refused(p16.get(), d16, a, st, "out_stride_m = H*V - 8 (rows overlap)", "out_stride_m");
  a = ok16;
  a.out_stride_m = HV + 4;
  expect_refused(p16.get(), d16, a, st, "out_stride_m = H*V + 4 (not a multiple of 8)", "out_stride_m");
  a = ok8;
  a.out_scale = nullptr;
  expect_refused(p8.get(), d8, a, st, "e4m3 out without out_scale", "out_scale");
  a = ok16;
  a.out = d_o.get();  // out over o
  expect_refused(p16.get(), d16, a, st, "out overlapping o", nullptr);
  a = okmx;
  a.w_scale = nullptr;
  expect_refused(pmx.get(), dmx, a, st, "mxfp8 with w_scale NULL", "w_scale");
  a = okmx;
  a.w_scale_stride_v = kGroups / 2;
  expect_refused(pmx.get(), dmx, a, st, "mxfp8 w_scale_stride_v = L/64 (< L/32: rows overlap)", "w_scale_stride_v");
  a = okblk;
  a.w_scale = nullptr;
  expect_refused(pblk.get(), dblk, a, st, "fp8-block with w_scale NULL", "w_scale");
  a = okblk;
  a.w_scale_stride_v = kScaleCols - 1;
  expect_refused(pblk.get(), dblk, a, st, "fp8-block w_scale_stride_v = L/128 - 1", "w_scale_stride_v");

  // Nothing was launched: both outputs all poison, o untouched.
  CUDA_REQUIRE(cudaStreamSynchronize(st));
  std::vector<uint16_t> o16, o_after;
  std::vector<uint8_t> o8;
  download(o16, d_out.get(), d_out.bytes() / 2, st);
  download(o8, d_out8.get(), d_out8.bytes(), st);
  download(o_after, d_o.get(), o.size(), st);
  CHECK(all_poison(o16, kPoisonBf16));
  CHECK(all_poison(o8, kPoisonE4m3));
  CHECK(count_differences(o_after, o) == 0);

  // And the plan still works afterwards, with an out_scale that bf16 output ignores.
  a = ok16;
  a.out_scale = d_scale.as<float>();
  std::vector<uint16_t> out;
  run_oproj(p16.get(), a, d_out, st, out);
  require_layout(check_out_layout<uint16_t>(c, out, kPoisonBf16));  // rows 16 .. max_m + 3 stay poison
  require_accuracy(check_accuracy(c, out, {}, reference(c, o, wb)), false);
  g_summary.extra_checks += 1;
}

// ---------------------------------------------------------------------------------------
// main: skip without a device; one spark context for the whole run.
// ---------------------------------------------------------------------------------------

int main(int argc, char** argv) {
  return gpu_suite_main("test_gpu_mla_oproj", argc, argv, [](double secs) {
    // Which tiling ran: the same suite runs on the built-in tiles, the stationary schedule
    // and ring tables (tests/CMakeLists.txt).
    const char* schedule = std::getenv("SPARK_OPROJ_SCHEDULE");
    const char* tiles = std::getenv("SPARK_OPROJ_TILES");
    const std::string tiling = tiles ? std::string("SPARK_OPROJ_TILES=") + tiles
                               : schedule ? std::string("SPARK_OPROJ_SCHEDULE=") + schedule
                                          : std::string("built-in tiles");
    std::printf("oproj gpu suite (%s): %zu cases checked (+%zu identity/graph/PDL/error-path cases), max rel err "
                "spark %.3e vs cublas %.3e (max err ratio spark/cublas %.4f), %.1f s\n",
                tiling.c_str(), g_summary.cases, g_summary.extra_checks, g_summary.max_rel_spark,
                g_summary.max_rel_cublas, g_summary.max_ratio, secs);
  });
}

// Argument checking of spark_mla_oproj_can_implement, without a GPU: fake (aligned,
// disjoint) device addresses, one mutation of a valid server layout at a time, each
// asserting the status and that the message names the argument.

#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <string>

#include "spark/spark.h"

namespace {

constexpr uintptr_t kOAddr = 0x7f0000000000ull;       // o [M, H, L] bf16
constexpr uintptr_t kWAddr = 0x7f1000000000ull;       // the kv_b pack [H, K+V, L]
constexpr uintptr_t kWScaleAddr = 0x7f2000000000ull;  // its scales
constexpr uintptr_t kOutAddr = 0x7f3000000000ull;     // out [M, H*V (+ pad)]
constexpr uintptr_t kScaleAddr = 0x7f4000000000ull;   // out_scale
constexpr int kL = 512, kK = 128;

const void* at(uintptr_t a) { return reinterpret_cast<const void*>(a); }

struct Call {
  spark_mla_oproj_desc desc = SPARK_MLA_OPROJ_DESC_INIT;
  spark_mla_oproj_args args = SPARK_MLA_OPROJ_ARGS_INIT;
};

// H heads, V 128, the server layout: w the last V rows of each head of the pack.
Call valid(spark_weight_format w = SPARK_WEIGHTS_BF16, spark_dtype out = SPARK_DTYPE_BF16, int heads = 16,
           int v = 128, int m = 64) {
  Call c;
  c.desc.heads = heads;
  c.desc.latent_dim = kL;
  c.desc.v_head_dim = v;
  c.desc.weight_format = w;
  c.desc.out_dtype = out;
  const bool fp8 = w != SPARK_WEIGHTS_BF16;
  c.args.m = m;
  c.args.o = at(kOAddr);
  c.args.o_stride_h = kL;
  c.args.o_stride_m = int64_t(heads) * kL;
  c.args.w = at(kWAddr + (fp8 ? 1 : 2) * kK * kL);
  c.args.w_stride_h = int64_t(kK + v) * kL;
  c.args.w_stride_v = kL;
  if (w == SPARK_WEIGHTS_MXFP8) {
    c.args.w_scale = at(kWScaleAddr + kK * (kL / 32));
    c.args.w_scale_stride_h = int64_t(kK + v) * (kL / 32);
    c.args.w_scale_stride_v = kL / 32;
  } else if (w == SPARK_WEIGHTS_FP8_BLOCK128) {
    c.args.w_scale = at(kWScaleAddr);
    c.args.w_scale_stride_h = kK + v;
    c.args.w_scale_stride_v = kL / 128;
  }
  c.args.out = reinterpret_cast<void*>(kOutAddr);
  c.args.out_stride_m = int64_t(heads) * v + 8;
  if (out == SPARK_DTYPE_E4M3) c.args.out_scale = reinterpret_cast<const float*>(kScaleAddr);
  return c;
}

void expect(const Call& c, spark_status status, const char* argument) {
  CHECK(spark_mla_oproj_can_implement(&c.desc, &c.args) == status);
  const std::string msg = spark_last_error();
  CAPTURE(msg);
  CHECK(msg.find(std::string("'") + argument + "'") != std::string::npos);
}

}  // namespace

TEST_CASE("valid oproj calls pass for every format and output") {
  for (auto w : {SPARK_WEIGHTS_BF16, SPARK_WEIGHTS_MXFP8, SPARK_WEIGHTS_FP8_BLOCK128})
    for (auto out : {SPARK_DTYPE_BF16, SPARK_DTYPE_E4M3})
      for (int v : {128, 256})
        for (int heads : {1, 11, 128}) {
          const Call c = valid(w, out, heads, v);
          CAPTURE(w);
          CAPTURE(out);
          CAPTURE(v);
          CAPTURE(heads);
          CHECK(spark_mla_oproj_can_implement(&c.desc, &c.args) == SPARK_SUCCESS);
          CHECK(spark_mla_oproj_can_implement(&c.desc, nullptr) == SPARK_SUCCESS);
        }
}

TEST_CASE("oproj descriptors outside the op are refused, naming the field") {
  Call c = valid();
  c.desc.v_head_dim = 192;
  expect(c, SPARK_ERROR_UNSUPPORTED, "v_head_dim");
  c = valid();
  c.desc.latent_dim = 256;
  expect(c, SPARK_ERROR_UNSUPPORTED, "latent_dim");
  c = valid();
  c.desc.heads = 0;
  expect(c, SPARK_ERROR_UNSUPPORTED, "heads");
  c = valid();
  c.desc.weight_format = static_cast<spark_weight_format>(7);
  expect(c, SPARK_ERROR_INVALID_ARGUMENT, "weight_format");
  c = valid();
  c.desc.out_dtype = static_cast<spark_dtype>(-1);
  expect(c, SPARK_ERROR_INVALID_ARGUMENT, "out_dtype");
  c = valid();
  c.desc.struct_size = 8;
  expect(c, SPARK_ERROR_INVALID_ARGUMENT, "struct_size");
  CHECK(spark_mla_oproj_can_implement(nullptr, nullptr) == SPARK_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("oproj arguments that break a rule are refused, naming the argument") {
  using Mutation = std::function<void(Call&)>;
  struct Case {
    const char* what;
    spark_weight_format w;
    spark_dtype out;
    Mutation mutate;
    const char* argument;
  };
  const auto bf = SPARK_WEIGHTS_BF16, mx = SPARK_WEIGHTS_MXFP8, blk = SPARK_WEIGHTS_FP8_BLOCK128;
  const auto b16 = SPARK_DTYPE_BF16, e4 = SPARK_DTYPE_E4M3;
  const Case cases[] = {
      {"m = 0", bf, b16, [](Call& c) { c.args.m = 0; }, "m"},
      {"m above 8192", bf, b16, [](Call& c) { c.args.m = 8193; }, "m"},
      {"null o", bf, b16, [](Call& c) { c.args.o = nullptr; }, "o"},
      {"null w", bf, b16, [](Call& c) { c.args.w = nullptr; }, "w"},
      {"null out", bf, b16, [](Call& c) { c.args.out = nullptr; }, "out"},
      {"scales with bf16 weights", bf, b16, [](Call& c) { c.args.w_scale = at(kWScaleAddr); }, "w_scale"},
      {"no MXFP8 scales", mx, b16, [](Call& c) { c.args.w_scale = nullptr; }, "w_scale"},
      {"no block scales", blk, b16, [](Call& c) { c.args.w_scale = nullptr; }, "w_scale"},
      {"no out_scale for e4m3", bf, e4, [](Call& c) { c.args.out_scale = nullptr; }, "out_scale"},
      {"misaligned out_scale", bf, e4, [](Call& c) { c.args.out_scale = reinterpret_cast<const float*>(kScaleAddr + 2); }, "out_scale"},
      {"misaligned o", bf, b16, [](Call& c) { c.args.o = at(kOAddr + 8); }, "o"},
      {"misaligned w", bf, b16, [](Call& c) { c.args.w = at(kWAddr + 8); }, "w"},
      {"misaligned out", bf, b16, [](Call& c) { c.args.out = reinterpret_cast<void*>(kOutAddr + 8); }, "out"},
      {"o_stride_h below L", bf, b16, [](Call& c) { c.args.o_stride_h = kL - 8; }, "o_stride_h"},
      {"o_stride_m not a multiple of 8", bf, b16, [](Call& c) { c.args.o_stride_m += 4; }, "o_stride_m"},
      {"negative w_stride_h", bf, b16, [](Call& c) { c.args.w_stride_h = -kL; }, "w_stride_h"},
      {"e4m3 w_stride_v not a multiple of 16", mx, b16, [](Call& c) { c.args.w_stride_v = kL + 8; }, "w_stride_v"},
      {"w_stride_v huge", bf, b16, [](Call& c) { c.args.w_stride_v = int64_t(1) << 41; }, "w_stride_v"},
      {"MXFP8 scale stride below L/32", mx, b16, [](Call& c) { c.args.w_scale_stride_v = 12; }, "w_scale_stride_v"},
      {"MXFP8 scales misaligned", mx, b16, [](Call& c) { c.args.w_scale = at(kWScaleAddr + 2); }, "w_scale"},
      {"block scale rows below V", blk, b16, [](Call& c) { c.args.w_scale_stride_h = 100; }, "w_scale_stride_h"},
      {"block scale stride below L/128", blk, b16, [](Call& c) { c.args.w_scale_stride_v = 3; }, "w_scale_stride_v"},
      {"out rows overlap", bf, b16, [](Call& c) { c.args.out_stride_m = 16 * 128 - 8; }, "out_stride_m"},
      {"out_stride_m not a multiple of 8", bf, e4, [](Call& c) { c.args.out_stride_m = 16 * 128 + 4; }, "out_stride_m"},
      {"out aliases o", bf, b16, [](Call& c) { c.args.out = reinterpret_cast<void*>(kOAddr + 4096); }, "out"},
      {"out aliases the weights", bf, b16, [](Call& c) { c.args.out = reinterpret_cast<void*>(kWAddr); }, "out"},
      {"out aliases out_scale", bf, e4, [](Call& c) { c.args.out_scale = reinterpret_cast<const float*>(kOutAddr + 64); }, "out"},
      {"block scales past the address space", blk, b16,
       [](Call& c) { c.args.w_scale = at(UINTPTR_MAX - 255); }, "w_scale"},
  };
  for (const Case& k : cases) {
    const std::string what = k.what;
    CAPTURE(what);
    Call c = valid(k.w, k.out);
    k.mutate(c);
    expect(c, SPARK_ERROR_INVALID_ARGUMENT, k.argument);
  }
}

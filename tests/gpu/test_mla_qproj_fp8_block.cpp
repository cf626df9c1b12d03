// GPU correctness suite of spark_mla_qproj_run with block-FP8 weights
// (SPARK_WEIGHTS_FP8_BLOCK128: the e4m3 kv_b_proj of DeepSeek-V3/R1, Kimi-K2 and GLM FP8
// checkpoints with one fp32 scale per 128 x 128 block of the packed weight).
//
// Exits SPARK_SKIP_CODE (77) with a message where there is no CUDA device.
//
// Layouts (q, q_pe and out as in the bf16-weight suite, see gpu_harness.h):
//   values  e4m3 [H, K, 512]: the first K rows of each head of a packed [H * P, 512] e4m3
//           kv_b_proj, P = K + V rows per head (w_stride_h P*512, w_stride_k 512)
//   scales  fp32 [ceil(H * P / 128), 4] (w_scale_stride_h P, w_scale_stride_k 4)
// with P = 448 (GLM: K 192 + V 256, so blocks straddle heads: head 1 starts at row 448, in
// the middle of block 3) and P = 256 (DeepSeek-V3 / Kimi-K2: K 128 + V 128).  Every pack
// byte outside the view is 0xFF (an e4m3 NaN) and every scale a kernel must not read is NaN,
// so a read outside the view shows up as NaN.
//
// Cases:
//   1. plans of every shape of the suite, created in parallel;
//   2. effective weights, bitwise (identity-like q_nope: q row m = e_(m mod K)): out[m, h, n]
//      must be exactly RN_bf16(fp32(float(value) * scale)) for every value code and scales
//      with random mantissas over 2^-135 .. 2^9 (so the fp32 product rounds and some results
//      are bf16 subnormals), in runs of M = 16, 64 and 2K rows (every M-regime);
//   3. accuracy over H x K x M, bf16 and e4m3 out: error vs float64 on the dequantised
//      weights <= 1.05 x cuBLAS bf16 bmm on them, RoPE bitwise, sentinels and pitch
//      untouched, determinism, e4m3 out bitwise quantize_e4m3(own bf16 result);
//   4. CUDA graph replay follows new scales;
//   5. argument errors of the scale tensor: a status, a message naming it, nothing written.
//
// Run with SPARK_TEST_SEED=<seed> to reproduce the random data of a failing run.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "spark/spark.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/gpu/mxfp8_data.h"
#include "tests/support/reference.h"

using namespace spark_test;
using namespace spark_gpu;

namespace {

constexpr int kBlock = 128;
constexpr int kScaleCols = kN / kBlock;  // 4 scales per block row

// Rows per head of the packed kv_b_proj: K + V.
int pack_rows_for(int K) { return K == 192 ? 448 : 256; }

// One packed kv_b_proj (whole, host side) and its block scales.
struct BlockWeights {
  int H = 0, K = 0, P = 0;
  std::vector<uint8_t> values;  // [H * P, 512]
  std::vector<float> scales;    // [block_rows, 4]

  BlockWeights(int h, int k) : H(h), K(k), P(pack_rows_for(k)) {
    values.assign(static_cast<size_t>(H) * P * kN, 0xFF);
    scales.assign(static_cast<size_t>(block_rows()) * kScaleCols, std::numeric_limits<float>::quiet_NaN());
  }
  int block_rows() const { return (H * P + kBlock - 1) / kBlock; }
  size_t value_index(int h, int k, int n) const { return (static_cast<size_t>(h) * P + k) * kN + n; }
  uint8_t& value(int h, int k, int n) { return values[value_index(h, k, n)]; }
  float& scale_of(int h, int k, int n) {
    return scales[static_cast<size_t>((h * P + k) / kBlock) * kScaleCols + n / kBlock];
  }
  float scale_of(int h, int k, int n) const { return const_cast<BlockWeights*>(this)->scale_of(h, k, n); }
  uint16_t dequant(int h, int k, int n) const {
    return dequant_fp8_block(values[value_index(h, k, n)], scale_of(h, k, n));
  }
  // Dense bf16 [H, K, 512] of dequant().
  std::vector<uint16_t> dequantised() const {
    std::vector<uint16_t> d(static_cast<size_t>(H) * K * kN);
    for (int h = 0; h < H; ++h)
      for (int k = 0; k < K; ++k)
        for (int n = 0; n < kN; ++n) d[(static_cast<size_t>(h) * K + k) * kN + n] = dequant(h, k, n);
    return d;
  }
};

// Scales with random mantissas, 2^lo .. 2^hi, on every block some row of the view lies in
// (the others stay NaN).
void fill_scales(BlockWeights& w, uint64_t seed, int lo, int hi) {
  for (int h = 0; h < w.H; ++h)
    for (int k = 0; k < w.K; ++k)
      for (int n = 0; n < kN; n += kBlock) {
        const uint64_t r = mix64(seed ^ (static_cast<uint64_t>((h * w.P + k) / kBlock) << 8) ^ uint64_t(n / kBlock));
        const float mantissa = 1.0f + static_cast<float>(r & 0x7FFFFF) * 0x1p-23f;
        w.scale_of(h, k, n) = std::ldexp(mantissa, lo + static_cast<int>((r >> 32) % uint64_t(hi - lo + 1)));
      }
}

// Every non-NaN e4m3 code, uniformly.
void fill_values_all_codes(BlockWeights& w, uint64_t seed) {
  uint64_t s = seed;
  for (int h = 0; h < w.H; ++h)
    for (int k = 0; k < w.K; ++k)
      for (int n = 0; n < kN; ++n) {
        uint8_t c;
        do {
          s = mix64(s + 1);
          c = static_cast<uint8_t>(s & 0xFF);
        } while (e4m3_is_nan(c));
        w.value(h, k, n) = c;
      }
}

// Realistic weights: e4m3 of N(0, 64^2) values (as fp8 checkpoints hold them), with scales
// around 2^-9 .. 2^-6 so the dequantised weights are ~N(0, 0.1^2).
void fill_realistic(BlockWeights& w, uint64_t seed) {
  std::vector<uint16_t> g(static_cast<size_t>(w.K) * kN);
  for (int h = 0; h < w.H; ++h) {
    fill_bf16_random(g.data(), g.size(), mix64(seed + h), 64.0f);
    for (int k = 0; k < w.K; ++k)
      for (int n = 0; n < kN; ++n)
        w.value(h, k, n) = float_to_e4m3_satfinite_rne(bf16_to_float(g[static_cast<size_t>(k) * kN + n]));
  }
  fill_scales(w, mix64(seed ^ 0x5CA1Eull), -9, -6);
}

struct DeviceBlock {
  int H = 0, K = 0, P = 0;
  DeviceBuffer values, scales;
};

void upload_block(DeviceBlock& d, const BlockWeights& w, cudaStream_t st) {
  if (d.values.bytes() == 0) {
    d.H = w.H, d.K = w.K, d.P = w.P;
    DEVICE_ALLOC(d.values, w.values.size());
    DEVICE_ALLOC(d.scales, w.scales.size() * sizeof(float));
  }
  upload(d.values.get(), w.values.data(), w.values.size(), st);
  upload(d.scales.get(), w.scales.data(), w.scales.size() * sizeof(float), st);
}

// The server layouts of make_args with block-FP8 weights; q_nope / q_pe start at q row row0.
spark_mla_qproj_args make_args_block(const Shape& s, const void* d_q, const DeviceBlock& w, void* d_out,
                                     const float* d_q_scale, int row0 = 0) {
  const uint16_t* q = static_cast<const uint16_t*>(d_q) + static_cast<int64_t>(row0) * s.q_stride_m();
  spark_mla_qproj_args a = make_args(s, q, w.values.get(), d_out, d_q_scale);
  a.w_stride_h = static_cast<int64_t>(w.P) * kN;
  a.w_stride_k = kN;
  a.w_scale = w.scales.get();
  a.w_scale_stride_h = w.P;
  a.w_scale_stride_k = kScaleCols;
  return a;
}

void reference_block(const Shape& s, const std::vector<uint16_t>& q, const std::vector<uint16_t>& wd,
                     std::vector<double>& ref) {
  ref.resize(s.ref_elems());
  reference_mla_qproj(s.H, s.M, s.K, kN, q.data(), s.q_stride_h(), s.q_stride_m(), wd.data(),
                      static_cast<int64_t>(s.K) * kN, kN, ref.data());
}

std::string fmt_example(int m, int h, int n, int k, uint8_t value, float scale, uint16_t want, uint16_t got) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "\n    m=%d h=%d n=%d (weight row k=%d): value 0x%02X x scale %a -> want 0x%04X, got 0x%04X",
                m, h, n, k, value, static_cast<double>(scale), want, got);
  return buf;
}

constexpr int kHeads[] = {1, 8, 11, 16, 32, 64, 128};
constexpr int kNopes[] = {128, 192};

}  // namespace

// ---------------------------------------------------------------------------------------
// 1. Plans.
// ---------------------------------------------------------------------------------------

TEST_CASE("fp8-block: plans for every shape of the suite (created in parallel)") {
  struct Job {
    int H, K;
    spark_dtype dtype;
    spark_status status = SPARK_ERROR_INTERNAL;
    std::string msg;
  };
  std::vector<Job> jobs;
  for (int H : kHeads)
    for (int K : kNopes)
      for (spark_dtype d : {SPARK_DTYPE_BF16, SPARK_DTYPE_E4M3}) jobs.push_back({H, K, d, SPARK_ERROR_INTERNAL, {}});
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
      Job& j = jobs[i];
      const spark_mla_qproj_desc desc = make_desc(j.H, j.K, j.dtype, SPARK_WEIGHTS_FP8_BLOCK128);
      spark_mla_qproj_plan_options opts;
      std::memset(&opts, 0, sizeof opts);
      opts.struct_size = sizeof opts;
      opts.max_m = kMaxM;
      spark_mla_qproj_plan p = nullptr;
      j.status = spark_mla_qproj_plan_create(g_ctx, &desc, &opts, &p);
      j.msg = spark_last_error();
      spark_mla_qproj_plan_destroy(p);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < std::min<unsigned>(8, std::max(1u, hardware_threads())); ++i) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  for (const Job& j : jobs)
    CHECK_MESSAGE(j.status == SPARK_SUCCESS, "plan_create H=" << j.H << " K=" << j.K << " fp8-block "
                                                              << cstr(dtype_name(j.dtype)) << ": " << j.msg);
}

// ---------------------------------------------------------------------------------------
// 2. The effective weights, bitwise.
// ---------------------------------------------------------------------------------------

namespace {

void run_identity(int H, int K) {
  const int m_full = 2 * K;
  Plan plan = make_plan_w(H, K, SPARK_WEIGHTS_FP8_BLOCK128, SPARK_DTYPE_BF16, m_full);
  Stream stream;
  CUDA_REQUIRE(stream.create());
  const cudaStream_t st = stream.get();
  const uint64_t seed = next_seed();
  INFO("identity H=" << H << " K=" << K << " pack rows " << pack_rows_for(K) << " seed=" << seed);

  const Shape full{H, K, m_full};
  std::vector<uint16_t> q;
  make_identity_q(H, K, kR, m_full, seed, q);
  BlockWeights w(H, K);
  fill_values_all_codes(w, mix64(seed ^ 0xB10Cull));
  fill_scales(w, mix64(seed ^ 0x5CA1Eull), -135, 9);  // down to products below 2^-126: bf16 subnormals
  w.scale_of(0, 0, 0) = 0x1.8p-133f;                             // ... at least one block of them
  DeviceBlock dw;
  upload_block(dw, w, st);
  DeviceBuffer d_q, d_out;
  DEVICE_ALLOC(d_q, full.q_elems() * 2);
  DEVICE_ALLOC(d_out, full.out_elems() * 2);
  upload(d_q.get(), q.data(), q.size() * 2, st);

  std::vector<std::pair<int, int>> runs = {{m_full, 0}};
  for (int r = 0; r + 16 <= K; r += 16) runs.emplace_back(16, r);
  for (int r = 0; r + 64 <= K; r += 64) runs.emplace_back(64, r);

  size_t checked = 0, mismatches = 0, zero_sign = 0, subnormal_refs = 0, rope_mismatches = 0;
  std::string examples;
  std::vector<uint16_t> out;
  for (const auto& run : runs) {
    const int M = run.first, row0 = run.second;
    INFO("run M=" << M << " from q row " << row0);
    const Shape s{H, K, M};
    run_and_fetch(plan.get(), make_args_block(s, d_q.get(), dw, d_out.get(), nullptr, row0), d_out, st, out);
    // The allocation holds 2K rows: its first M + 3 are this run's rows and sentinels.
    const std::vector<uint16_t> head(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(s.out_elems()));
    require_layout(check_layout<uint16_t>(s, head, kPoisonBf16));
    CHECK(std::all_of(out.begin() + static_cast<std::ptrdiff_t>(s.out_elems()), out.end(),
                      [](uint16_t x) { return x == kPoisonBf16; }));
    for (int m = 0; m < M; ++m)
      for (int h = 0; h < H; ++h) {
        const int k = (row0 + m) % K;
        const uint16_t* row = out.data() + (static_cast<size_t>(m) * H + h) * s.pitch;
        for (int n = 0; n < kN; ++n) {
          const uint16_t want = w.dequant(h, k, n), got = row[n];
          ++checked;
          subnormal_refs += (want & 0x7F80u) == 0 && (want & 0x7Fu) != 0;
          if (got == want) continue;
          if ((got & 0x7FFFu) == 0 && (want & 0x7FFFu) == 0) {
            ++zero_sign;
            continue;
          }
          if (++mismatches <= 5)
            examples += fmt_example(m, h, n, k, w.values[w.value_index(h, k, n)], w.scale_of(h, k, n), want, got);
        }
        const uint16_t* qpe = q.data() + static_cast<size_t>(row0 + m) * full.q_stride_m() + h * full.q_stride_h() + K;
        for (int r = 0; r < kR; ++r) rope_mismatches += row[kN + r] != qpe[r];
      }
  }
  std::printf("  fp8-block identity H=%-3d K=%d: %zu elements bitwise (%zu subnormal refs), %zu +-0 accepted, "
              "%zu mismatches\n",
              H, K, checked, subnormal_refs, zero_sign, mismatches);
  std::fflush(stdout);
  CHECK_MESSAGE(mismatches == 0, mismatches << " elements are not RN_bf16(fp32(value * scale))" << examples);
  CHECK(rope_mismatches == 0);
  CHECK(subnormal_refs > 0);
  g_summary.extra_checks += 1;
}

}  // namespace

TEST_CASE("fp8-block effective weights bitwise (identity q_nope): H=1 K=128") { run_identity(1, 128); }
TEST_CASE("fp8-block effective weights bitwise (identity q_nope): H=11 K=128") { run_identity(11, 128); }
TEST_CASE("fp8-block effective weights bitwise (identity q_nope, blocks straddle heads): H=3 K=192") {
  run_identity(3, 192);
}
TEST_CASE("fp8-block effective weights bitwise (identity q_nope, blocks straddle heads): H=11 K=192") {
  run_identity(11, 192);
}
TEST_CASE("fp8-block effective weights bitwise (identity q_nope, blocks straddle heads): H=64 K=192") {
  run_identity(64, 192);
}

// ---------------------------------------------------------------------------------------
// 3. The accuracy contract, bf16 and e4m3 out.
// ---------------------------------------------------------------------------------------

namespace {

void run_shape(int H, int K, const std::vector<int>& Ms) {
  Plan p16 = make_plan_w(H, K, SPARK_WEIGHTS_FP8_BLOCK128, SPARK_DTYPE_BF16, kMaxM);
  Plan p8 = make_plan_w(H, K, SPARK_WEIGHTS_FP8_BLOCK128, SPARK_DTYPE_E4M3, kMaxM);
  Stream stream;
  CUDA_REQUIRE(stream.create());
  const cudaStream_t st = stream.get();
  const int max_m = *std::max_element(Ms.begin(), Ms.end());
  const Shape big{H, K, max_m};
  DeviceBlock dw;
  DeviceBuffer d_q, d_wd, d_c, d_scale;
  DEVICE_ALLOC(d_q, big.q_elems() * 2);
  DEVICE_ALLOC(d_wd, static_cast<size_t>(H) * K * kN * 2);
  DEVICE_ALLOC(d_c, static_cast<size_t>(H) * max_m * kN * 2);
  DEVICE_ALLOC(d_scale, sizeof(float));
  std::vector<uint16_t> q, out1, out2, cub;
  std::vector<uint8_t> out8;
  std::vector<double> ref;
  for (int M : Ms) {
    const Shape s{H, K, M, sweep_pitch(M)};
    const uint64_t seed = next_seed();
    INFO(shape_str(s) << " weights=fp8-block seed=" << seed);
    q.resize(s.q_elems());
    fill_bf16_random(q.data(), q.size(), seed, 1.0f);
    BlockWeights w(H, K);
    fill_realistic(w, mix64(seed ^ 0x3AF8ull));
    const std::vector<uint16_t> wd = w.dequantised();
    upload(d_q.get(), q.data(), q.size() * 2, st);
    upload_block(dw, w, st);
    upload(d_wd.get(), wd.data(), wd.size() * 2, st);
    DeviceBuffer d_out, d_out8;
    DEVICE_ALLOC(d_out, s.out_elems() * 2);
    DEVICE_ALLOC(d_out8, s.out_elems());
    reference_block(s, q, wd, ref);

    AccuracyReport acc;
    {
      const spark_mla_qproj_args args = make_args_block(s, d_q.get(), dw, d_out.get(), nullptr);
      run_and_fetch(p16.get(), args, d_out, st, out1);
      run_cublas_w(s, d_q, d_wd.get(), static_cast<int64_t>(K) * kN, kN, d_c, st, cub);
      require_layout(check_layout<uint16_t>(s, out1, kPoisonBf16));
      acc = check_bf16(s, out1, cub, ref, q);
      require_accuracy(acc, true);
      run_and_fetch(p16.get(), args, d_out, st, out2);
      CHECK(count_differences(out1, out2) == 0);
    }
    {
      const float scale = kScales[g_summary.cases % kNumScales];
      set_q_scale(d_scale, scale, st);
      const spark_mla_qproj_args args = make_args_block(s, d_q.get(), dw, d_out8.get(), d_scale.as<float>());
      run_and_fetch(p8.get(), args, d_out8, st, out8);
      require_layout(check_layout<uint8_t>(s, out8, kPoisonE4m3));
      const E4m3Report r = check_e4m3(s, out8, out1, q, scale, e4m3_table(scale), nullptr);
      INFO(r.mismatch << " e4m3 elements differ from the rule" << r.examples);
      CHECK(r.mismatch == 0);
    }
    ++g_summary.cases;
    g_summary.max_rel_spark = std::max(g_summary.max_rel_spark, acc.rel_spark);
    g_summary.max_rel_cublas = std::max(g_summary.max_rel_cublas, acc.rel_cublas);
    if (acc.err_cublas > 0) g_summary.max_ratio = std::max(g_summary.max_ratio, acc.err_spark / acc.err_cublas);
    std::printf("  fp8-block %-22s rel err spark %.3e cublas %.3e (ratio %.4f)\n", shape_str(s).c_str(),
                acc.rel_spark, acc.rel_cublas, acc.err_cublas > 0 ? acc.err_spark / acc.err_cublas : 0.0);
    std::fflush(stdout);
  }
}

#define SPARK_MS_FULL 1, 2, 16, 17, 33, 64, 100, 200, 257, 1000
#define SPARK_MS_MANY_HEADS 1, 16, 17, 64, 100, 200, 257, 600

}  // namespace

#define SPARK_BLOCK_SHAPE_CASE(H, K, MS)                                                                     \
  TEST_CASE("mla_qproj fp8-block weights: H=" #H " K=" #K ", M in {" SPARK_TEST_STR(MS) "}, bf16 + e4m3 out") { \
    run_shape(H, K, std::vector<int>{MS});                                                                   \
  }

SPARK_BLOCK_SHAPE_CASE(1, 128, SPARK_MS_FULL)
SPARK_BLOCK_SHAPE_CASE(8, 192, SPARK_MS_FULL)
SPARK_BLOCK_SHAPE_CASE(11, 192, SPARK_MS_FULL)
SPARK_BLOCK_SHAPE_CASE(16, 128, SPARK_MS_FULL)
SPARK_BLOCK_SHAPE_CASE(32, 128, SPARK_MS_MANY_HEADS)
SPARK_BLOCK_SHAPE_CASE(64, 192, SPARK_MS_MANY_HEADS)
SPARK_BLOCK_SHAPE_CASE(128, 128, SPARK_MS_MANY_HEADS)
SPARK_BLOCK_SHAPE_CASE(128, 192, SPARK_MS_MANY_HEADS)

// ---------------------------------------------------------------------------------------
// 4. A captured graph follows new scales.
// ---------------------------------------------------------------------------------------

TEST_CASE("fp8-block: CUDA graph replay follows new contents of the scales") {
  const Shape s{16, 192, 33};
  Plan p16 = make_plan_w(s.H, s.K, SPARK_WEIGHTS_FP8_BLOCK128, SPARK_DTYPE_BF16, 64);
  Plan p8 = make_plan_w(s.H, s.K, SPARK_WEIGHTS_FP8_BLOCK128, SPARK_DTYPE_E4M3, 64);
  Stream stream;
  CUDA_REQUIRE(stream.create());
  const cudaStream_t st = stream.get();
  const uint64_t seed = next_seed();
  INFO("seed=" << seed);
  std::vector<uint16_t> q(s.q_elems());
  fill_bf16_random(q.data(), q.size(), seed, 1.0f);
  BlockWeights w(s.H, s.K);
  fill_realistic(w, mix64(seed ^ 1));
  DeviceBlock dw;
  upload_block(dw, w, st);
  DeviceBuffer d_q, d_out, d_out8, d_scale;
  DEVICE_ALLOC(d_q, s.q_elems() * 2);
  DEVICE_ALLOC(d_out, s.out_elems() * 2);
  DEVICE_ALLOC(d_out8, s.out_elems());
  DEVICE_ALLOC(d_scale, sizeof(float));
  upload(d_q.get(), q.data(), q.size() * 2, st);
  set_q_scale(d_scale, kScales[0], st);
  const spark_mla_qproj_args a16 = make_args_block(s, d_q.get(), dw, d_out.get(), nullptr);
  const spark_mla_qproj_args a8 = make_args_block(s, d_q.get(), dw, d_out8.get(), d_scale.as<float>());
  Graph g;
  capture_run_pair(g, st, p16.get(), a16, p8.get(), a8, d_out, d_out8);

  // New scales only: the replay must use them, bitwise as an eager run does.
  fill_scales(w, mix64(seed ^ 2), -8, -5);
  upload_block(dw, w, st);
  std::vector<uint16_t> r16, e16;
  std::vector<uint8_t> r8, e8;
  replay_pair(g, st, d_out, d_out8, r16, r8);
  run_and_fetch(p16.get(), a16, d_out, st, e16);
  run_and_fetch(p8.get(), a8, d_out8, st, e8);
  CHECK(count_differences(r16, e16) == 0);
  CHECK(count_differences(r8, e8) == 0);
  std::vector<double> ref;
  reference_block(s, q, w.dequantised(), ref);
  require_accuracy(check_bf16(s, r16, {}, ref, q), false);
  g_summary.extra_checks += 1;
}

// ---------------------------------------------------------------------------------------
// 5. Argument errors of the scales.
// ---------------------------------------------------------------------------------------

TEST_CASE("fp8-block: run rejects bad scale arguments with a message naming the argument, and writes nothing") {
  const Shape s{11, 192, 17};
  Plan plan = make_plan_w(s.H, s.K, SPARK_WEIGHTS_FP8_BLOCK128, SPARK_DTYPE_BF16, 64);
  Stream stream;
  CUDA_REQUIRE(stream.create());
  const cudaStream_t st = stream.get();
  BlockWeights w(s.H, s.K);
  fill_realistic(w, next_seed());
  DeviceBlock dw;
  upload_block(dw, w, st);
  DeviceBuffer d_q, d_out;
  DEVICE_ALLOC(d_q, s.q_elems() * 2);
  DEVICE_ALLOC(d_out, s.out_elems() * 2);
  poison(d_out, st);
  const spark_mla_qproj_args ok = make_args_block(s, d_q.get(), dw, d_out.get(), nullptr);
  spark_mla_qproj_args a = ok;
  a.w_scale = nullptr;
  expect_invalid(plan.get(), a, st, "w_scale NULL", "w_scale");
  a = ok;
  a.w_scale = static_cast<const uint8_t*>(ok.w_scale) + 2;
  expect_invalid(plan.get(), a, st, "w_scale + 2 bytes", "w_scale");
  a = ok;
  a.w_scale_stride_h = s.K - 1;
  expect_invalid(plan.get(), a, st, "w_scale_stride_h < K", "w_scale_stride_h");
  a = ok;
  a.w_scale_stride_k = 3;
  expect_invalid(plan.get(), a, st, "w_scale_stride_k < N/128", "w_scale_stride_k");
  a = ok;
  a.out = const_cast<void*>(ok.w_scale);
  expect_invalid(plan.get(), a, st, "out over the scales", "out");
  std::vector<uint16_t> o;
  download(o, d_out.get(), s.out_elems(), st);
  CHECK(std::all_of(o.begin(), o.end(), [](uint16_t x) { return x == kPoisonBf16; }));
  g_summary.extra_checks += 1;
}

int main(int argc, char** argv) {
  return gpu_suite_main("test_gpu_mla_qproj_fp8_block", argc, argv, [](double secs) {
    std::printf("fp8-block gpu suite: %zu cases checked (+%zu identity/graph/error-path cases), max rel err spark "
                "%.3e vs cublas %.3e (max err ratio spark/cublas %.4f), %.1f s\n",
                g_summary.cases, g_summary.extra_checks, g_summary.max_rel_spark, g_summary.max_rel_cublas,
                g_summary.max_ratio, secs);
  });
}

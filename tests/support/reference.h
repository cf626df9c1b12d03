// Host reference code for the spark test suites (namespace spark_test).
//
//   - bf16 / e4m3fn / e8m0 bit-level conversions, written from the formats' definitions
//     (no CUDA header, no hardware conversion), so they can judge the kernels bit for bit;
//   - quantize_e4m3: spark.h's e4m3 output rule;
//   - dequant_mxfp8: spark.h's MXFP8 weight dequantisation rule;
//   - reference_mla_qproj: a multithreaded float64 reference of the MLA query projection;
//   - reference_mla_oproj: the same for the MLA value up-projection;
//   - seeds and fast deterministic random bf16 fills (never zero);
//   - parallel_for over index ranges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>

namespace spark_test {

// ---------------------------------------------------------------------------------------
// bf16 (1-8-7), bits in a uint16_t.
// ---------------------------------------------------------------------------------------

// Round-to-nearest-even float -> bf16.  Overflow gives +-inf.  NaN stays NaN: sign and the
// top payload bits are kept and the quiet bit is set (so a NaN never turns into inf).
uint16_t float_to_bf16_rne(float f);

// Exact bf16 -> float.
float bf16_to_float(uint16_t b);

// True when the bits are a bf16 NaN.
inline bool bf16_is_nan(uint16_t b) { return (b & 0x7FFFu) > 0x7F80u; }

// ---------------------------------------------------------------------------------------
// e4m3fn (1-4-3, bias 7, no infinities; 0x7F / 0xFF are NaN; max finite 448 = 0x7E;
// subnormals m * 2^-9), bits in a uint8_t.
// ---------------------------------------------------------------------------------------

// Exact decode of all 256 codes (NaN codes give a quiet NaN with the code's sign).
float e4m3_to_float(uint8_t code);

// True for 0x7F and 0xFF.
inline bool e4m3_is_nan(uint8_t code) { return (code & 0x7Fu) == 0x7Fu; }

// Round-to-nearest-even with saturation to the largest finite value ("satfinite"):
// finite values beyond +-448 and +-inf give +-448 (0x7E / 0xFE); NaN gives 0x7F with
// the sign kept (0x7F or 0xFF); subnormals (multiples of 2^-9) are rounded exactly;
// -0 gives 0x80.
uint8_t float_to_e4m3_satfinite_rne(float f);

// spark.h's e4m3 output rule for one bf16 value:
//   inv = 1.0f / q_scale               (IEEE round-to-nearest division == __frcp_rn)
//   x   = bf16_to_float(v) * inv       (float multiply, round-to-nearest)
//   x   = clamp(x, -448, 448)          (NaN stays NaN)
//   return float_to_e4m3_satfinite_rne(x)
uint8_t quantize_e4m3(uint16_t bf16_value, float q_scale);

// ---------------------------------------------------------------------------------------
// e8m0 scale bytes and the MXFP8 weight rule.
// ---------------------------------------------------------------------------------------

// bf16 bits of 2^(byte - 127): byte 0 is 2^-127, a bf16 subnormal (0x0040); bytes
// 1..254 are byte << 7; byte 255 is NaN (0x7FFF, CUDA's canonical bf16 NaN).
uint16_t e8m0_to_bf16(uint8_t scale_byte);

// The canonical bf16 NaN that dequant_mxfp8 returns (CUDA's __float2bfloat16_rn of a NaN).
constexpr uint16_t kBf16CanonicalNaN = 0x7FFFu;

// w = RN_bf16( bf16(e4m3 value) * bf16(2^(byte - 127)) ): the product is computed in
// float (exact while it is in float's range; it overflows to inf for e.g. 448 * 2^127)
// and rounded to nearest-even bf16, subnormals included.  A NaN code or scale byte 255
// gives kBf16CanonicalNaN.
uint16_t dequant_mxfp8(uint8_t e4m3_value, uint8_t scale_byte);

// Block FP8 (the checkpoints' weight_scale_inv rule): w = RN_bf16( fp32(float(e4m3 value) *
// scale) ), the product rounded to float first, then once to nearest-even bf16.
uint16_t dequant_fp8_block(uint8_t e4m3_value, float scale);

// ---------------------------------------------------------------------------------------
// Float64 reference of the MLA query projection (bf16 inputs).
// ---------------------------------------------------------------------------------------

// out_ref[(m * H + h) * N + n] = sum_k double(q_nope[h, m, k]) * double(w[h, k, n])
// (dense [M][H][N] doubles, fully overwritten), where
//   q_nope(h, m, k) = q_nope[h * q_nope_stride_h + m * q_nope_stride_m + k]
//   w(h, k, n)      = w[h * w_stride_h + k * w_stride_k + n]
// are bf16 bits (for MXFP8, pass the dequantised weights).  Multithreaded over heads
// (and over row blocks when H is small); num_threads 0 = every hardware thread.
void reference_mla_qproj(int H, int M, int K, int N, const uint16_t* q_nope,
                         int64_t q_nope_stride_h, int64_t q_nope_stride_m, const uint16_t* w,
                         int64_t w_stride_h, int64_t w_stride_k, double* out_ref,
                         unsigned num_threads = 0);

// Float64 reference of the MLA value up-projection (bf16 inputs).
//
// out_ref[m * H * V + h * V + v] = sum_l double(o[m, h, l]) * double(w[h, l, v])
// (dense [M][H*V] doubles, fully overwritten), where
//   o(m, h, l) = o[m * o_stride_m + h * o_stride_h + l]
//   w(h, l, v) = w[h * w_stride_h + v * w_stride_v + l]      (W_UV: one row per v, L contiguous)
// are bf16 bits (for MXFP8 or block FP8, pass the dequantised weights).  Multithreaded as
// reference_mla_qproj; num_threads 0 = every hardware thread.
void reference_mla_oproj(int H, int M, int L, int V, const uint16_t* o, int64_t o_stride_m,
                         int64_t o_stride_h, const uint16_t* w, int64_t w_stride_h,
                         int64_t w_stride_v, double* out_ref, unsigned num_threads = 0);

// ---------------------------------------------------------------------------------------
// Threads, seeds, random data.
// ---------------------------------------------------------------------------------------

// std::thread::hardware_concurrency(), at least 1.
unsigned hardware_threads();

// Splits [0, n) into contiguous chunks and calls fn(begin, end, chunk_index) for each on
// up to num_threads threads (0 = hardware_threads()).  chunk_index < the returned chunk
// count.  Blocks until all are done.  fn must not throw.
unsigned parallel_for(size_t n, const std::function<void(size_t, size_t, unsigned)>& fn,
                      unsigned num_threads = 0);

// The base seed of this process: $SPARK_TEST_SEED when set (decimal or 0x hex), else
// drawn once from std::random_device.  Print it so a failure can be reproduced.
uint64_t base_seed();

// A fresh seed per call: a hash of base_seed() and a process-wide counter.  With the same
// base seed and the same order of calls, the same sequence.
uint64_t next_seed();

// splitmix64 finaliser (a good 64-bit mixer).
uint64_t mix64(uint64_t x);

// Fills dst[0..n) with bf16 bits of scale * (approximately standard normal) values,
// deterministic in (seed, n) and independent of the thread count.  Never zero (nor NaN,
// nor inf): a value that would round to zero is replaced by +-scale * 2^-7.  scale must be
// finite and non-zero.  Multithreaded.
void fill_bf16_random(uint16_t* dst, size_t n, uint64_t seed, float scale = 1.0f);

// A small random generator for scalars (a std::mt19937_64 wrapper).
class Rng {
 public:
  explicit Rng(uint64_t seed) : seed_(seed), engine_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t next_u64() { return engine_(); }
  // Uniform in [lo, hi).
  double uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(engine_);
  }
  // Standard normal.
  double normal() { return std::normal_distribution<double>(0.0, 1.0)(engine_); }
  std::mt19937_64& engine() { return engine_; }

 private:
  uint64_t seed_;
  std::mt19937_64 engine_;
};

}  // namespace spark_test

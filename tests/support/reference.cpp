// Host reference code for the spark test suites.  See reference.h.
#include "tests/support/reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace spark_test {

// ---------------------------------------------------------------------------------------
// bf16
// ---------------------------------------------------------------------------------------

uint16_t float_to_bf16_rne(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
    // NaN: keep the sign and the top payload bits, force the quiet bit so the result
    // cannot collapse to an infinity.
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  }
  // Round to nearest, ties to even; a carry out of the mantissa bumps the exponent
  // (up to +-inf), which is the correct rounding.
  const uint32_t lsb = (u >> 16) & 1u;
  u += 0x7FFFu + lsb;
  return static_cast<uint16_t>(u >> 16);
}

float bf16_to_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// ---------------------------------------------------------------------------------------
// e4m3fn
// ---------------------------------------------------------------------------------------

float e4m3_to_float(uint8_t code) {
  const bool neg = (code & 0x80u) != 0;
  const int e = (code >> 3) & 0xF;
  const int m = code & 0x7;
  float v;
  if (e == 15 && m == 7) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<float>(m), -9);  // subnormal: m * 2^-9
  } else {
    v = std::ldexp(static_cast<float>(8 + m), e - 10);  // (1 + m/8) * 2^(e-7)
  }
  return neg ? -v : v;
}

uint8_t float_to_e4m3_satfinite_rne(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint8_t sign = (u >> 31) ? 0x80u : 0x00u;
  if (std::isnan(f)) return static_cast<uint8_t>(sign | 0x7Fu);
  const float a = std::fabs(f);
  // Everything at or beyond the largest finite value (inf included) saturates.  Values in
  // [448, 464) round to 448 anyway; [464, inf] would round to 480 (NaN code): satfinite.
  if (!(a < 448.0f)) return static_cast<uint8_t>(sign | 0x7Eu);
  if (a < 0x1p-6f) {
    // Subnormal range (and zero): a quantum of 2^-9.  a * 512 is exact; r in 0..8, and
    // r == 8 is the code of 2^-6 (exponent field 1, mantissa 0), so r is the code.
    const float r = std::nearbyint(a * 512.0f);
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(r));
  }
  int e2 = 0;
  (void)std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1)
  const int E = e2 - 1;      // a in [2^E, 2^(E+1)), -6 <= E <= 8
  const float r = std::nearbyint(std::ldexp(a, 3 - E));  // in [8, 16], exact scaling
  int code = ((E + 7) << 3) + (static_cast<int>(r) - 8);  // r == 16 carries into the exponent
  if (code > 0x7E) code = 0x7E;
  return static_cast<uint8_t>(sign | static_cast<uint8_t>(code));
}

uint8_t quantize_e4m3(uint16_t bf16_value, float q_scale) {
  const float inv = 1.0f / q_scale;           // IEEE RN division == __frcp_rn
  float x = bf16_to_float(bf16_value) * inv;  // RN float multiply
  if (x > 448.0f) {
    x = 448.0f;
  } else if (x < -448.0f) {
    x = -448.0f;
  }  // NaN compares false both ways and stays NaN
  return float_to_e4m3_satfinite_rne(x);
}

// ---------------------------------------------------------------------------------------
// e8m0 / MXFP8
// ---------------------------------------------------------------------------------------

uint16_t e8m0_to_bf16(uint8_t scale_byte) {
  if (scale_byte == 255) return kBf16CanonicalNaN;
  if (scale_byte == 0) return 0x0040u;  // 2^-127: bf16 subnormal, mantissa bit 6
  return static_cast<uint16_t>(static_cast<uint16_t>(scale_byte) << 7);
}

uint16_t dequant_fp8_block(uint8_t e4m3_value, float scale) {
  volatile float p = e4m3_to_float(e4m3_value) * scale;  // one IEEE float multiply, never fused
  return float_to_bf16_rne(p);
}

uint16_t dequant_mxfp8(uint8_t e4m3_value, uint8_t scale_byte) {
  if (scale_byte == 255 || e4m3_is_nan(e4m3_value)) return kBf16CanonicalNaN;
  // bf16(e4m3) is exact (3 mantissa bits, exponent range well inside bf16's).
  const float v = bf16_to_float(float_to_bf16_rne(e4m3_to_float(e4m3_value)));
  const float s = bf16_to_float(e8m0_to_bf16(scale_byte));
  const float p = v * s;  // exact unless it overflows (to inf); never below 2^-136
  if (std::isnan(p)) return kBf16CanonicalNaN;
  return float_to_bf16_rne(p);
}

// ---------------------------------------------------------------------------------------
// Threads
// ---------------------------------------------------------------------------------------

unsigned hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1u : n;
}

unsigned parallel_for(size_t n, const std::function<void(size_t, size_t, unsigned)>& fn,
                      unsigned num_threads) {
  if (n == 0) return 0;
  unsigned threads = num_threads == 0 ? hardware_threads() : num_threads;
  // Below a few thousand items threads cost more than they save.
  const size_t min_chunk = 4096;
  const size_t max_chunks = std::max<size_t>(1, (n + min_chunk - 1) / min_chunk);
  const unsigned chunks = static_cast<unsigned>(std::min<size_t>(threads, max_chunks));
  const size_t per = (n + chunks - 1) / chunks;
  if (chunks == 1) {
    fn(0, n, 0);
    return 1;
  }
  std::vector<std::thread> pool;
  pool.reserve(chunks);
  for (unsigned c = 0; c < chunks; ++c) {
    const size_t b = static_cast<size_t>(c) * per;
    const size_t e = std::min(n, b + per);
    if (b >= e) {
      pool.emplace_back([] {});
      continue;
    }
    pool.emplace_back([&fn, b, e, c] { fn(b, e, c); });
  }
  for (auto& t : pool) t.join();
  return chunks;
}

// ---------------------------------------------------------------------------------------
// Float64 reference
// ---------------------------------------------------------------------------------------

namespace {

// y[0..n) += a * x[0..n).  Written in blocks of 8 so that -O2 (GCC's very-cheap vector
// cost model) still unrolls and vectorises it.
inline void axpy(double* __restrict y, const double* __restrict x, double a, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) y[i + j] += a * x[i + j];
  }
  for (; i < n; ++i) y[i] += a * x[i];
}

}  // namespace

void reference_mla_qproj(int H, int M, int K, int N, const uint16_t* q_nope,
                         int64_t q_nope_stride_h, int64_t q_nope_stride_m, const uint16_t* w,
                         int64_t w_stride_h, int64_t w_stride_k, double* out_ref,
                         unsigned num_threads) {
  if (H <= 0 || M <= 0 || N <= 0) return;
  if (K <= 0) {
    std::fill(out_ref, out_ref + static_cast<size_t>(M) * H * N, 0.0);
    return;
  }
  const unsigned threads = num_threads == 0 ? hardware_threads() : num_threads;
  // Tasks: (head, row block).  With few heads, split the rows so every thread has work;
  // each task converts its head's weights to double once (K*N), cheap next to its
  // rows * K * N multiply-adds.
  int blocks_per_head = 1;
  if (static_cast<unsigned>(H) < 2 * threads) {
    blocks_per_head = static_cast<int>((2 * threads + H - 1) / H);
  }
  blocks_per_head = std::max(1, std::min(blocks_per_head, (M + 15) / 16));
  const int rows_per_block = (M + blocks_per_head - 1) / blocks_per_head;
  const int tasks = H * blocks_per_head;

  std::atomic<int> next{0};
  auto worker = [&] {
    std::vector<double> wd(static_cast<size_t>(K) * N);
    int last_head = -1;
    for (;;) {
      const int t = next.fetch_add(1);
      if (t >= tasks) break;
      const int h = t / blocks_per_head;
      const int blk = t % blocks_per_head;
      const int m0 = blk * rows_per_block;
      const int m1 = std::min(M, m0 + rows_per_block);
      if (m0 >= m1) continue;
      if (h != last_head) {
        const uint16_t* wh = w + static_cast<int64_t>(h) * w_stride_h;
        for (int k = 0; k < K; ++k) {
          const uint16_t* wr = wh + static_cast<int64_t>(k) * w_stride_k;
          double* dr = wd.data() + static_cast<size_t>(k) * N;
          for (int n = 0; n < N; ++n) dr[n] = static_cast<double>(bf16_to_float(wr[n]));
        }
        last_head = h;
      }
      for (int m = m0; m < m1; ++m) {
        const uint16_t* qr =
            q_nope + static_cast<int64_t>(h) * q_nope_stride_h + static_cast<int64_t>(m) * q_nope_stride_m;
        double* row = out_ref + (static_cast<size_t>(m) * H + h) * N;
        std::fill(row, row + N, 0.0);
        for (int k = 0; k < K; ++k) {
          const double a = static_cast<double>(bf16_to_float(qr[k]));
          axpy(row, wd.data() + static_cast<size_t>(k) * N, a, N);
        }
      }
    }
  };
  const unsigned nthreads = static_cast<unsigned>(std::min<int>(static_cast<int>(threads), tasks));
  if (nthreads <= 1) {
    worker();
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(nthreads);
  for (unsigned i = 0; i < nthreads; ++i) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
}

void reference_mla_oproj(int H, int M, int L, int V, const uint16_t* o, int64_t o_stride_m,
                         int64_t o_stride_h, const uint16_t* w, int64_t w_stride_h,
                         int64_t w_stride_v, double* out_ref, unsigned num_threads) {
  if (H <= 0 || M <= 0 || V <= 0) return;
  // W_UV[h] copied to a dense [L, V] bf16 matrix: the query projection's reference with o as
  // q_nope then computes exactly this sum, and its [M][H][N] output is the [M][H*V] one.
  const size_t per_head = static_cast<size_t>(std::max(L, 0)) * V;
  std::vector<uint16_t> wt(static_cast<size_t>(H) * per_head);
  parallel_for(static_cast<size_t>(H) * V, [&](size_t b, size_t e, unsigned) {
    for (size_t hv = b; hv < e; ++hv) {
      const int64_t h = static_cast<int64_t>(hv / V), v = static_cast<int64_t>(hv % V);
      const uint16_t* row = w + h * w_stride_h + v * w_stride_v;
      uint16_t* dst = wt.data() + static_cast<size_t>(h) * per_head + static_cast<size_t>(v);
      for (int l = 0; l < L; ++l) dst[static_cast<size_t>(l) * V] = row[l];
    }
  }, num_threads);
  reference_mla_qproj(H, M, L, V, o, o_stride_h, o_stride_m, wt.data(), static_cast<int64_t>(per_head), V, out_ref,
                      num_threads);
}

// ---------------------------------------------------------------------------------------
// Seeds and random data
// ---------------------------------------------------------------------------------------

uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t base_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("SPARK_TEST_SEED");
    if (env != nullptr && *env != '\0') {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(env, &end, 0);
      if (end != env) return static_cast<uint64_t>(v);
    }
    std::random_device rd;
    const uint64_t hi = rd();
    const uint64_t lo = rd();
    return (hi << 32) ^ lo;
  }();
  return seed;
}

uint64_t next_seed() {
  static std::atomic<uint64_t> counter{0};
  const uint64_t c = counter.fetch_add(1) + 1;
  return mix64(base_seed() ^ mix64(c));
}

void fill_bf16_random(uint16_t* dst, size_t n, uint64_t seed, float scale) {
  const uint64_t key = mix64(seed);
  // Replacement for a value that would be zero: +-scale * 2^-7.
  uint16_t tiny = float_to_bf16_rne(std::fabs(scale) * 0x1p-7f);
  if ((tiny & 0x7FFFu) == 0) tiny = 0x3C00u;  // 2^-7, should scale underflow
  parallel_for(n, [&](size_t b, size_t e, unsigned) {
    for (size_t i = b; i < e; ++i) {
      const uint64_t r = mix64(key ^ (0xD1B54A32D192ED03ull * (i + 1)));
      // Irwin-Hall with four 16-bit uniforms (offset by 1/2 each), centred: variance
      // 4/12; times sqrt(3) gives unit variance, range about +-3.46.
      const int64_t s = static_cast<int64_t>(r & 0xFFFF) + static_cast<int64_t>((r >> 16) & 0xFFFF) +
                        static_cast<int64_t>((r >> 32) & 0xFFFF) + static_cast<int64_t>(r >> 48) + 2 -
                        4 * 32768;
      const float x = static_cast<float>(static_cast<double>(s) * (1.7320508075688772 / 65536.0)) * scale;
      uint16_t bits = float_to_bf16_rne(x);
      if ((bits & 0x7FFFu) == 0 || (bits & 0x7F80u) == 0x7F80u) {
        bits = static_cast<uint16_t>(tiny | ((r & 1u) ? 0x8000u : 0u));
      }
      dst[i] = bits;
    }
  });
}

}  // namespace spark_test

// Device-side helpers of spark-bench (see device_ops.h).
#include "tools/spark-bench/device_ops.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "tools/spark-bench/check.h"

namespace spark_bench {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(uint64_t items) { return static_cast<unsigned>((items + kThreads - 1) / kThreads); }

// splitmix64 finaliser.
__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Irwin-Hall sum of four 16-bit uniforms, scaled to unit variance: close enough to normal.
__device__ __forceinline__ float approx_normal(uint64_t h) {
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) s += static_cast<float>((h >> (16 * j)) & 0xFFFFu) * (1.0f / 65536.0f);
  return (s - 2.0f) * 1.7320508f;
}

__global__ void fill_bf16_kernel(uint4* __restrict__ dst, uint64_t n_vec, uint64_t seed, float scale) {
  const uint64_t v = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= n_vec) return;
  const float tiny = scale * (1.0f / 128.0f);
  uint32_t words[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float f[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float x = scale * approx_normal(mix64(seed ^ (v * 8 + 2 * i + j)));
      if (fabsf(x) < tiny) x = copysignf(tiny, x);  // never zero
      f[j] = x;
    }
    const __nv_bfloat162 pair = __floats2bfloat162_rn(f[0], f[1]);
    words[i] = *reinterpret_cast<const uint32_t*>(&pair);
  }
  dst[v] = make_uint4(words[0], words[1], words[2], words[3]);
}

__global__ void fill_e4m3_kernel(uint4* __restrict__ dst, uint64_t n_vec, uint64_t seed) {
  const uint64_t v = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= n_vec) return;
  uint32_t words[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t w = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float x = 2.0f * approx_normal(mix64(seed ^ (v * 16 + 4 * i + j)));
      uint32_t code = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
      if ((code & 0x7Fu) == 0) code |= 0x08u;  // +-0 -> +-2^-6: never zero (satfinite never gives NaN)
      w |= code << (8 * j);
    }
    words[i] = w;
  }
  dst[v] = make_uint4(words[0], words[1], words[2], words[3]);
}

__global__ void fill_scales_kernel(uint32_t* __restrict__ dst, uint64_t n_words, uint64_t seed) {
  const uint64_t v = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= n_words) return;
  const uint64_t h = mix64(seed ^ v);
  uint32_t w = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) w |= static_cast<uint32_t>(120 + ((h >> (16 * j)) & 0xFFFFu) % 5) << (8 * j);
  dst[v] = w;
}

// One thread per 8 values (never straddles a 32-column scale block).
__global__ void dequant_kernel(const uint2* __restrict__ values, const uint8_t* __restrict__ scales,
                               uint4* __restrict__ out, uint64_t n_vec) {
  const uint64_t v = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= n_vec) return;
  const uint64_t row = v / 64, col = (v % 64) * 8;  // 512 values per row
  const uint32_t s = scales[row * 16 + col / 32];
  const uint2 x = values[v];
  const uint32_t codes[2] = {x.x, x.y};
  uint32_t words[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint16_t b[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int e = 2 * i + j;
      __nv_fp8_e4m3 q;
      q.__x = static_cast<__nv_fp8_storage_t>((codes[e / 4] >> (8 * (e % 4))) & 0xFFu);
      // Exact in float (3 mantissa bits times a power of two), then one RN to bf16; scale
      // byte 255 is NaN (never generated here, kept for the rule's sake).
      const __nv_bfloat16 bw = __float2bfloat16_rn(ldexpf(static_cast<float>(q), static_cast<int>(s) - 127));
      b[j] = s == 255u ? static_cast<uint16_t>(0x7FFF) : *reinterpret_cast<const uint16_t*>(&bw);
    }
    words[i] = b[0] | (static_cast<uint32_t>(b[1]) << 16);
  }
  out[v] = make_uint4(words[0], words[1], words[2], words[3]);
}

__global__ void fill_block_scales_kernel(float* __restrict__ dst, uint64_t n, uint64_t seed) {
  const uint64_t v = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= n) return;
  const uint64_t h = mix64(seed ^ v);
  const int e = -8 + static_cast<int>((h >> 32) % 7);
  const float mantissa = 1.0f + static_cast<float>(h & 0x7FFFFFu) * (1.0f / 8388608.0f);  // exact: 23 bits
  dst[v] = ldexpf(mantissa, e);
}

// One thread per 8 values (never straddles a 128-column block).
__global__ void dequant_block_kernel(const uint2* __restrict__ values, const float* __restrict__ scales,
                                     uint4* __restrict__ out, uint64_t n_vec, uint64_t rows_per_pack,
                                     uint64_t scale_rows_per_pack) {
  const uint64_t v = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= n_vec) return;
  const uint64_t row = v / 64, col = (v % 64) * 8;  // 512 values per row
  const uint64_t pack = row / rows_per_pack, p = row % rows_per_pack;
  const float s = scales[(pack * scale_rows_per_pack + p / 128) * 4 + col / 128];
  const uint2 x = values[v];
  const uint32_t codes[2] = {x.x, x.y};
  uint32_t words[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint16_t b[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int e = 2 * i + j;
      __nv_fp8_e4m3 q;
      q.__x = static_cast<__nv_fp8_storage_t>((codes[e / 4] >> (8 * (e % 4))) & 0xFFu);
      // float(e4m3) is exact; __fmul_rn rounds the fp32 product to nearest (never contracted
      // into an FMA), then one round to nearest even to bf16: the checkpoints' rule.
      const __nv_bfloat16 bw = __float2bfloat16_rn(__fmul_rn(static_cast<float>(q), s));
      b[j] = *reinterpret_cast<const uint16_t*>(&bw);
    }
    words[i] = b[0] | (static_cast<uint32_t>(b[1]) << 16);
  }
  out[v] = make_uint4(words[0], words[1], words[2], words[3]);
}

__device__ __forceinline__ int ordered_bf16(uint32_t b) { return (b & 0x8000u) ? -static_cast<int>(b & 0x7FFFu) : static_cast<int>(b); }
__device__ __forceinline__ int ordered_e4m3(uint32_t b) { return (b & 0x80u) ? -static_cast<int>(b & 0x7Fu) : static_cast<int>(b); }
__device__ __forceinline__ bool bf16_nan(uint32_t b) { return (b & 0x7FFFu) > 0x7F80u; }
__device__ __forceinline__ bool e4m3_nan(uint32_t b) { return (b & 0x7Fu) == 0x7Fu; }

__device__ __forceinline__ void add_counts(unsigned long long* counters, unsigned diff, unsigned bad, unsigned nan_a,
                                           unsigned pad) {
  diff = __reduce_add_sync(0xFFFFFFFFu, diff);
  bad = __reduce_add_sync(0xFFFFFFFFu, bad);
  nan_a = __reduce_add_sync(0xFFFFFFFFu, nan_a);
  pad = __reduce_add_sync(0xFFFFFFFFu, pad);
  if ((threadIdx.x & 31) == 0) {
    if (diff) atomicAdd(&counters[0], static_cast<unsigned long long>(diff));
    if (bad) atomicAdd(&counters[1], static_cast<unsigned long long>(bad));
    if (nan_a) atomicAdd(&counters[2], static_cast<unsigned long long>(nan_a));
    if (pad) atomicAdd(&counters[3], static_cast<unsigned long long>(pad));
  }
}

// Grid-stride loops over every element of the rows, pad included; no thread returns early, so
// the warp reductions at the end see all 32 lanes (blockDim is a multiple of 32).
__global__ void compare_bf16_kernel(const uint16_t* __restrict__ a, const uint16_t* __restrict__ b, uint64_t n,
                                    uint32_t cols, uint32_t pitch, unsigned long long* counters, float abs_tol) {
  unsigned diff = 0, bad = 0, nan_a = 0, pad = 0;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint32_t x = a[i];
    if (i % pitch >= cols) {
      pad += x != 0xFFFFu;
      continue;
    }
    const uint32_t y = b[i];
    if (x == y && !bf16_nan(x)) continue;
    diff += x != y;
    nan_a += bf16_nan(x);
    if (bf16_nan(x) || bf16_nan(y)) {
      ++bad;
      continue;
    }
    const int ulps = abs(ordered_bf16(x) - ordered_bf16(y));
    const float fx = __uint_as_float(x << 16), fy = __uint_as_float(y << 16);
    if (ulps > 1 && fabsf(fx - fy) > abs_tol) ++bad;
  }
  add_counts(counters, diff, bad, nan_a, pad);
}

__global__ void compare_e4m3_kernel(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b, uint64_t n,
                                    uint32_t cols, uint32_t pitch, unsigned long long* counters) {
  unsigned diff = 0, bad = 0, nan_a = 0, pad = 0;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint32_t x = a[i];
    if (i % pitch >= cols) {
      pad += x != 0xFFu;
      continue;
    }
    const uint32_t y = b[i];
    if (x == y && !e4m3_nan(x)) continue;
    diff += x != y;
    nan_a += e4m3_nan(x);
    if (e4m3_nan(x) || e4m3_nan(y) || abs(ordered_e4m3(x) - ordered_e4m3(y)) > 1) ++bad;
  }
  add_counts(counters, diff, bad, nan_a, pad);
}

__global__ void spin_kernel(uint64_t ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

unsigned compare_blocks(uint64_t n) {
  const uint64_t b = blocks_for(n);
  return static_cast<unsigned>(b < 2048 ? b : 2048);
}

}  // namespace

void fill_bf16_random(uint16_t* dst, size_t n, uint64_t seed, float scale, cudaStream_t stream) {
  if (n % 8 != 0) throw BenchError("fill_bf16_random: n must be a multiple of 8");
  const uint64_t n_vec = n / 8;
  if (n_vec == 0) return;
  fill_bf16_kernel<<<blocks_for(n_vec), kThreads, 0, stream>>>(reinterpret_cast<uint4*>(dst), n_vec, seed, scale);
  BENCH_CUDA(cudaGetLastError());
}

void fill_mxfp8_random(uint8_t* values, size_t n_values, uint8_t* scales, size_t n_scales, uint64_t seed,
                       cudaStream_t stream) {
  if (n_values % 16 != 0 || n_scales % 4 != 0) throw BenchError("fill_mxfp8_random: sizes must be multiples of 16 / 4");
  if (n_values > 0) {
    fill_e4m3_kernel<<<blocks_for(n_values / 16), kThreads, 0, stream>>>(reinterpret_cast<uint4*>(values),
                                                                         n_values / 16, seed);
    BENCH_CUDA(cudaGetLastError());
  }
  if (n_scales > 0) {
    fill_scales_kernel<<<blocks_for(n_scales / 4), kThreads, 0, stream>>>(reinterpret_cast<uint32_t*>(scales),
                                                                          n_scales / 4, seed ^ 0x5CA1E5ull);
    BENCH_CUDA(cudaGetLastError());
  }
}

void dequant_mxfp8(const uint8_t* values, const uint8_t* scales, uint16_t* out, size_t rows, cudaStream_t stream) {
  const uint64_t n_vec = static_cast<uint64_t>(rows) * 64;
  if (n_vec == 0) return;
  dequant_kernel<<<blocks_for(n_vec), kThreads, 0, stream>>>(reinterpret_cast<const uint2*>(values), scales,
                                                             reinterpret_cast<uint4*>(out), n_vec);
  BENCH_CUDA(cudaGetLastError());
}

void fill_fp8_block_random(uint8_t* values, size_t n_values, float* scales, size_t n_scales, uint64_t seed,
                           cudaStream_t stream) {
  if (n_values % 16 != 0) throw BenchError("fill_fp8_block_random: n_values must be a multiple of 16");
  if (n_values > 0) {
    fill_e4m3_kernel<<<blocks_for(n_values / 16), kThreads, 0, stream>>>(reinterpret_cast<uint4*>(values),
                                                                         n_values / 16, seed);
    BENCH_CUDA(cudaGetLastError());
  }
  if (n_scales > 0) {
    fill_block_scales_kernel<<<blocks_for(n_scales), kThreads, 0, stream>>>(scales, n_scales, seed ^ 0xB10C5ull);
    BENCH_CUDA(cudaGetLastError());
  }
}

void dequant_fp8_block(const uint8_t* values, const float* scales, uint16_t* out, size_t rows_per_pack,
                       size_t scale_rows_per_pack, size_t packs, cudaStream_t stream) {
  if (scale_rows_per_pack * 128 < rows_per_pack) throw BenchError("dequant_fp8_block: too few scale rows");
  const uint64_t n_vec = static_cast<uint64_t>(rows_per_pack) * packs * 64;
  if (n_vec == 0) return;
  dequant_block_kernel<<<blocks_for(n_vec), kThreads, 0, stream>>>(reinterpret_cast<const uint2*>(values), scales,
                                                                   reinterpret_cast<uint4*>(out), n_vec,
                                                                   rows_per_pack, scale_rows_per_pack);
  BENCH_CUDA(cudaGetLastError());
}

void compare_bf16(const uint16_t* a, const uint16_t* b, size_t rows, int cols, int pitch,
                  unsigned long long* counters, cudaStream_t stream) {
  if (cols < 0 || pitch <= 0 || pitch < cols) throw BenchError("compare_bf16: need 0 <= cols <= pitch and pitch > 0");
  const uint64_t n = static_cast<uint64_t>(rows) * static_cast<uint64_t>(pitch);
  if (n == 0) return;
  compare_bf16_kernel<<<compare_blocks(n), kThreads, 0, stream>>>(a, b, n, static_cast<uint32_t>(cols),
                                                                  static_cast<uint32_t>(pitch), counters,
                                                                  static_cast<float>(kCompareAbsTol));
  BENCH_CUDA(cudaGetLastError());
}

void compare_e4m3(const uint8_t* a, const uint8_t* b, size_t rows, int cols, int pitch,
                  unsigned long long* counters, cudaStream_t stream) {
  if (cols < 0 || pitch <= 0 || pitch < cols) throw BenchError("compare_e4m3: need 0 <= cols <= pitch and pitch > 0");
  const uint64_t n = static_cast<uint64_t>(rows) * static_cast<uint64_t>(pitch);
  if (n == 0) return;
  compare_e4m3_kernel<<<compare_blocks(n), kThreads, 0, stream>>>(a, b, n, static_cast<uint32_t>(cols),
                                                                  static_cast<uint32_t>(pitch), counters);
  BENCH_CUDA(cudaGetLastError());
}

void spin(uint64_t ns, cudaStream_t stream) {
  spin_kernel<<<1, 1, 0, stream>>>(ns);
  BENCH_CUDA(cudaGetLastError());
}

}  // namespace spark_bench

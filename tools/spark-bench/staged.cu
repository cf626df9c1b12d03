// The staged arm's kernels and its per-layer launch sequence (see staged.h).
#include "tools/spark-bench/staged.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "tools/spark-bench/check.h"

namespace spark_bench {
namespace {

constexpr int kN = 512;
constexpr int kR = 64;
constexpr int kNR = kN + kR;
constexpr int kVec = 8;                 // bf16 elements per 16-byte vector
constexpr int kRowVecs = kNR / kVec;    // 72 vectors per (m, h) output row
constexpr int kBmmVecs = kN / kVec;     // 64 of them come from bmm_out, 8 from q_pe
constexpr int kThreads = 256;

static_assert(kN % kVec == 0 && kR % kVec == 0, "rows must split into 16-byte vectors");

unsigned blocks_for(uint64_t items) { return static_cast<unsigned>((items + kThreads - 1) / kThreads); }

// out[m, h, 0:N] = bmm_out[h, m, :], out[m, h, N:N+R] = q_pe[m, h, :]: one thread per 16-byte
// vector of out, so the writes are contiguous within each row (and across rows when they are
// unpadded) and every 32-thread warp reads 512 contiguous bytes of one bmm_out row (or 128 of
// one q_pe row).  out's rows are out_pitch_vecs 16-byte vectors apart.
__global__ void concat_kernel(const uint4* __restrict__ bmm_out, const uint16_t* __restrict__ q_pe,
                              int64_t q_pe_stride_m, int64_t q_pe_stride_h, uint4* __restrict__ out, int m_rows,
                              int heads, uint32_t out_pitch_vecs) {
  const uint64_t v = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const uint64_t total = static_cast<uint64_t>(m_rows) * heads * kRowVecs;
  if (v >= total) return;
  const uint32_t row = static_cast<uint32_t>(v / kRowVecs);  // m * H + h
  const uint32_t col = static_cast<uint32_t>(v % kRowVecs);
  const uint32_t m = row / heads, h = row % heads;
  uint4 val;
  if (col < kBmmVecs) {
    val = bmm_out[(static_cast<uint64_t>(h) * m_rows + m) * kBmmVecs + col];
  } else {
    val = *reinterpret_cast<const uint4*>(q_pe + m * q_pe_stride_m + h * q_pe_stride_h + (col - kBmmVecs) * kVec);
  }
  out[static_cast<uint64_t>(row) * out_pitch_vecs + col] = val;
}

// clamp(x, -448, 448) keeping NaN (as torch.clamp does; fminf/fmaxf would drop it).
__device__ __forceinline__ float clamp448(float x) { return x < -448.0f ? -448.0f : (x > 448.0f ? 448.0f : x); }

__device__ __forceinline__ uint16_t e4m3x2(float lo, float hi) {
  return static_cast<uint16_t>(__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3));
}

// Where the 8 elements of contiguous vector v land in an output whose rows are pitch_vecs
// 8-element vectors apart.
__device__ __forceinline__ uint64_t pitched_vec(uint64_t v, uint32_t pitch_vecs) {
  return (v / kRowVecs) * pitch_vecs + v % kRowVecs;
}

// out = e4m3(clamp(float(x) * rcp_rn(*q_scale), +-448)) for 8 elements per thread; in is
// contiguous, out's rows are out_pitch_vecs 8-byte vectors apart.
__global__ void quant_fused_kernel(const uint4* __restrict__ in, uint2* __restrict__ out, uint64_t n_vec,
                                   const float* __restrict__ q_scale, uint32_t out_pitch_vecs) {
  const uint64_t v = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= n_vec) return;
  const float inv = __frcp_rn(*q_scale);
  const uint4 x = in[v];
  const uint32_t words[4] = {x.x, x.y, x.z, x.w};
  uint16_t packed[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __nv_bfloat162 pair;
    *reinterpret_cast<uint32_t*>(&pair) = words[i];
    const float2 f = __bfloat1622float2(pair);
    packed[i] = e4m3x2(clamp448(f.x * inv), clamp448(f.y * inv));
  }
  out[pitched_vec(v, out_pitch_vecs)] = make_uint2(packed[0] | (static_cast<uint32_t>(packed[1]) << 16),
                                                   packed[2] | (static_cast<uint32_t>(packed[3]) << 16));
}

// Eager PyTorch, one op per kernel, 8 elements per thread.
__global__ void bf16_to_f32_kernel(const uint4* __restrict__ in, float4* __restrict__ out, uint64_t n_vec) {
  const uint64_t v = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= n_vec) return;
  const uint4 x = in[v];
  const uint32_t words[4] = {x.x, x.y, x.z, x.w};
  float f[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __nv_bfloat162 pair;
    *reinterpret_cast<uint32_t*>(&pair) = words[i];
    const float2 p = __bfloat1622float2(pair);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
  out[2 * v] = make_float4(f[0], f[1], f[2], f[3]);
  out[2 * v + 1] = make_float4(f[4], f[5], f[6], f[7]);
}

// x / scale with a 0-dim CUDA tensor: a true IEEE division per element (no reciprocal).
__global__ void div_scalar_kernel(const float4* __restrict__ in, float4* __restrict__ out, uint64_t n_vec,
                                  const float* __restrict__ scale) {
  const uint64_t v = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= n_vec) return;
  const float s = *scale;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const float4 x = in[2 * v + j];
    out[2 * v + j] = make_float4(__fdiv_rn(x.x, s), __fdiv_rn(x.y, s), __fdiv_rn(x.z, s), __fdiv_rn(x.w, s));
  }
}

__global__ void clamp_kernel(const float4* __restrict__ in, float4* __restrict__ out, uint64_t n_vec) {
  const uint64_t v = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= n_vec) return;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const float4 x = in[2 * v + j];
    out[2 * v + j] = make_float4(clamp448(x.x), clamp448(x.y), clamp448(x.z), clamp448(x.w));
  }
}

__global__ void f32_to_e4m3_kernel(const float4* __restrict__ in, uint2* __restrict__ out, uint64_t n_vec,
                                   uint32_t out_pitch_vecs) {
  const uint64_t v = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= n_vec) return;
  const float4 a = in[2 * v], b = in[2 * v + 1];
  out[pitched_vec(v, out_pitch_vecs)] =
      make_uint2(e4m3x2(a.x, a.y) | (static_cast<uint32_t>(e4m3x2(a.z, a.w)) << 16),
                 e4m3x2(b.x, b.y) | (static_cast<uint32_t>(e4m3x2(b.z, b.w)) << 16));
}

}  // namespace

int staged_kernel_count(bool e4m3_out, StagedQuant quant) {
  if (!e4m3_out) return 2;
  return quant == StagedQuant::kFused ? 3 : 6;
}

void enqueue_staged(cublasHandle_t cublas, const StagedTensors& t, bool e4m3_out, StagedQuant quant,
                    cudaStream_t stream) {
  // Checked before anything is enqueued: a throw in the middle would leave a capture half made.
  if (t.out_pitch < kNR || t.out_pitch % kVec != 0) throw BenchError("enqueue_staged: bad out_pitch");
  const int H = t.heads, K = t.nope, M = t.m;
  const int64_t q_stride_h = K + kR;                          // q_nope.transpose(0, 1): [H, M, K]
  const int64_t q_stride_m = static_cast<int64_t>(H) * (K + kR);

  // Row-major bmm_out[h] (M x N) = q_nope[h] (M x K) @ w[h] (K x N), written column-major as
  // bmm_out[h]^T (N x M) = w[h]^T (N x K) * q_nope[h]^T (K x M): what torch.bmm asks cuBLAS for.
  const float alpha = 1.0f, beta = 0.0f;
  BENCH_CUBLAS(cublasGemmStridedBatchedEx(cublas, CUBLAS_OP_N, CUBLAS_OP_N, kN, M, K, &alpha, t.w, CUDA_R_16BF,
                                          static_cast<int>(t.w_stride_k), static_cast<long long>(t.w_stride_h),
                                          t.q, CUDA_R_16BF, static_cast<int>(q_stride_m),
                                          static_cast<long long>(q_stride_h), &beta, t.bmm_out, CUDA_R_16BF, kN,
                                          static_cast<long long>(M) * kN, H, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));

  const uint32_t pitch_vecs = static_cast<uint32_t>(t.out_pitch / kVec);
  const uint64_t out_elems = static_cast<uint64_t>(M) * H * kNR;
  const uint64_t cat_vecs = out_elems / kVec;
  // bf16 output: the concat writes the pitched output itself; e4m3: a contiguous temporary.
  concat_kernel<<<blocks_for(cat_vecs), kThreads, 0, stream>>>(
      reinterpret_cast<const uint4*>(t.bmm_out), t.q + K, q_stride_m, q_stride_h, reinterpret_cast<uint4*>(t.cat_out),
      M, H, e4m3_out ? static_cast<uint32_t>(kRowVecs) : pitch_vecs);
  BENCH_CUDA(cudaGetLastError());
  if (!e4m3_out) return;

  const unsigned blocks = blocks_for(cat_vecs);
  if (quant == StagedQuant::kFused) {
    quant_fused_kernel<<<blocks, kThreads, 0, stream>>>(reinterpret_cast<const uint4*>(t.cat_out),
                                                        reinterpret_cast<uint2*>(t.out_e4m3), cat_vecs, t.q_scale,
                                                        pitch_vecs);
    BENCH_CUDA(cudaGetLastError());
    return;
  }
  auto* a = reinterpret_cast<float4*>(t.f32_a);
  auto* b = reinterpret_cast<float4*>(t.f32_b);
  bf16_to_f32_kernel<<<blocks, kThreads, 0, stream>>>(reinterpret_cast<const uint4*>(t.cat_out), a, cat_vecs);
  BENCH_CUDA(cudaGetLastError());
  div_scalar_kernel<<<blocks, kThreads, 0, stream>>>(a, b, cat_vecs, t.q_scale);
  BENCH_CUDA(cudaGetLastError());
  clamp_kernel<<<blocks, kThreads, 0, stream>>>(b, a, cat_vecs);
  BENCH_CUDA(cudaGetLastError());
  f32_to_e4m3_kernel<<<blocks, kThreads, 0, stream>>>(a, reinterpret_cast<uint2*>(t.out_e4m3), cat_vecs,
                                                      pitch_vecs);
  BENCH_CUDA(cudaGetLastError());
}

}  // namespace spark_bench

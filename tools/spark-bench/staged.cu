// The staged arm's kernels and its per-layer launch sequence (see staged.h).
#include "tools/spark-bench/staged.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "tools/spark-bench/check.h"

namespace spark_bench {
namespace {

constexpr int kN = 512;                 // qproj's N, oproj's L
constexpr int kR = 64;
constexpr int kNR = kN + kR;
constexpr int kVec = 8;                 // bf16 elements per 16-byte vector
constexpr int kRowVecs = kNR / kVec;    // 72 vectors per (m, h) output row of the query projection
constexpr int kThreads = 256;

static_assert(kN % kVec == 0 && kR % kVec == 0, "rows must split into 16-byte vectors");

unsigned blocks_for(uint64_t items) { return static_cast<unsigned>((items + kThreads - 1) / kThreads); }

// out[m, h, 0:N] = bmm_out[h, m, :], out[m, h, N:N+R] = q_pe[m, h, :], N = kNVecs and R =
// kRVecs 16-byte vectors (the value up-projection's transpose copy is R = 0, N = V): one thread
// per 16-byte vector of out, so the writes are contiguous within each row (and across rows when
// they are unpadded) and every 32-thread warp reads contiguous bytes of bmm_out rows (or 128 of
// one q_pe row).  Vector (m, h, c) of out is at m * out_stride_m + h * out_stride_h + c (in
// vectors): rows (m, h) a pitch apart for the query projection, rows m for the other.
template <int kNVecs, int kRVecs>
__global__ void concat_kernel(const uint4* __restrict__ bmm_out, const uint16_t* __restrict__ q_pe,
                              int64_t q_pe_stride_m, int64_t q_pe_stride_h, uint4* __restrict__ out, int m_rows,
                              int heads, uint64_t out_stride_m, uint32_t out_stride_h) {
  constexpr int kVecs = kNVecs + kRVecs;
  const uint64_t v = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const uint64_t total = static_cast<uint64_t>(m_rows) * heads * kVecs;
  if (v >= total) return;
  const uint32_t row = static_cast<uint32_t>(v / kVecs);  // m * H + h
  const uint32_t col = static_cast<uint32_t>(v % kVecs);
  const uint32_t m = row / heads, h = row % heads;
  uint4 val;
  if (kRVecs == 0 || col < kNVecs) {
    val = bmm_out[(static_cast<uint64_t>(h) * m_rows + m) * kNVecs + col];
  } else {
    val = *reinterpret_cast<const uint4*>(q_pe + m * q_pe_stride_m + h * q_pe_stride_h + (col - kNVecs) * kVec);
  }
  out[m * out_stride_m + h * out_stride_h + col] = val;
}

// clamp(x, -448, 448) keeping NaN (as torch.clamp does; fminf/fmaxf would drop it).
__device__ __forceinline__ float clamp448(float x) { return x < -448.0f ? -448.0f : (x > 448.0f ? 448.0f : x); }

__device__ __forceinline__ uint16_t e4m3x2(float lo, float hi) {
  return static_cast<uint16_t>(__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3));
}

// Where the 8 elements of contiguous vector v land in an output whose rows of row_vecs vectors
// are pitch_vecs 8-element vectors apart.  kRowVecsFixed: row_vecs known at compile time (a
// multiply and shift); 0: given at run time, divided in 32 bits (enqueue_staged checks that v
// fits), as a 64-bit division is a long subroutine.
template <uint32_t kRowVecsFixed>
__device__ __forceinline__ uint64_t pitched_vec(uint64_t v, uint32_t row_vecs, uint32_t pitch_vecs) {
  if constexpr (kRowVecsFixed != 0) {
    return (v / kRowVecsFixed) * pitch_vecs + v % kRowVecsFixed;
  } else {
    const uint32_t v32 = static_cast<uint32_t>(v);
    return static_cast<uint64_t>(v32 / row_vecs) * pitch_vecs + v32 % row_vecs;
  }
}

// out = e4m3(clamp(float(x) * rcp_rn(*q_scale), +-448)) for 8 elements per thread; in is
// contiguous, out's rows are out_pitch_vecs 8-byte vectors apart.
template <uint32_t kRowVecsFixed>
__global__ void quant_fused_kernel(const uint4* __restrict__ in, uint2* __restrict__ out, uint64_t n_vec,
                                   const float* __restrict__ q_scale, uint32_t row_vecs, uint32_t out_pitch_vecs) {
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
  out[pitched_vec<kRowVecsFixed>(v, row_vecs, out_pitch_vecs)] =
      make_uint2(packed[0] | (static_cast<uint32_t>(packed[1]) << 16),
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

template <uint32_t kRowVecsFixed>
__global__ void f32_to_e4m3_kernel(const float4* __restrict__ in, uint2* __restrict__ out, uint64_t n_vec,
                                   uint32_t row_vecs, uint32_t out_pitch_vecs) {
  const uint64_t v = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= n_vec) return;
  const float4 a = in[2 * v], b = in[2 * v + 1];
  out[pitched_vec<kRowVecsFixed>(v, row_vecs, out_pitch_vecs)] =
      make_uint2(e4m3x2(a.x, a.y) | (static_cast<uint32_t>(e4m3x2(a.z, a.w)) << 16),
                 e4m3x2(b.x, b.y) | (static_cast<uint32_t>(e4m3x2(b.z, b.w)) << 16));
}

// For e4m3 output: the contiguous bf16 temporary (vecs vectors, rows of row_vecs) quantised
// into the pitched output, by one kernel (fused) or four (eager).
template <uint32_t kRowVecsFixed>
void enqueue_quant(const StagedOutputs& o, uint64_t vecs, uint32_t row_vecs, StagedQuant quant, cudaStream_t stream) {
  const uint32_t out_pitch_vecs = static_cast<uint32_t>(o.out_pitch / kVec);
  const unsigned blocks = blocks_for(vecs);
  if (quant == StagedQuant::kFused) {
    quant_fused_kernel<kRowVecsFixed><<<blocks, kThreads, 0, stream>>>(
        reinterpret_cast<const uint4*>(o.bf16_out), reinterpret_cast<uint2*>(o.out_e4m3), vecs, o.scale, row_vecs,
        out_pitch_vecs);
    BENCH_CUDA(cudaGetLastError());
    return;
  }
  auto* a = reinterpret_cast<float4*>(o.f32_a);
  auto* b = reinterpret_cast<float4*>(o.f32_b);
  bf16_to_f32_kernel<<<blocks, kThreads, 0, stream>>>(reinterpret_cast<const uint4*>(o.bf16_out), a, vecs);
  BENCH_CUDA(cudaGetLastError());
  div_scalar_kernel<<<blocks, kThreads, 0, stream>>>(a, b, vecs, o.scale);
  BENCH_CUDA(cudaGetLastError());
  clamp_kernel<<<blocks, kThreads, 0, stream>>>(b, a, vecs);
  BENCH_CUDA(cudaGetLastError());
  f32_to_e4m3_kernel<kRowVecsFixed><<<blocks, kThreads, 0, stream>>>(a, reinterpret_cast<uint2*>(o.out_e4m3), vecs,
                                                                     row_vecs, out_pitch_vecs);
  BENCH_CUDA(cudaGetLastError());
}

// After the bmm: the concat (or transpose copy) of bmm_out [H, M, kNVecs vectors] (and q_pe's
// kRVecs) into the outputs, then for e4m3 output the quantisation.  Output rows hold row_vecs
// vectors; rows_per_head: a row is (m, h) (query projection), else m.
struct CopyAndQuant {
  StagedOutputs out;
  int m = 0, heads = 0;
  bool rows_per_head = true;
  uint32_t row_vecs = 0;
  const uint16_t* q_pe = nullptr;
  int64_t q_pe_stride_m = 0, q_pe_stride_h = 0;
};

template <int kNVecs, int kRVecs, uint32_t kRowVecsFixed>
void enqueue_copy_and_quant(const CopyAndQuant& t, bool e4m3_out, StagedQuant quant, cudaStream_t stream) {
  const StagedOutputs& o = t.out;
  const uint32_t out_pitch_vecs = static_cast<uint32_t>(o.out_pitch / kVec);
  // bf16 output: the copy writes the pitched output itself; e4m3: a contiguous temporary.
  const uint32_t pitch = e4m3_out ? t.row_vecs : out_pitch_vecs;
  const uint64_t stride_m = t.rows_per_head ? static_cast<uint64_t>(t.heads) * pitch : pitch;
  const uint32_t stride_h = t.rows_per_head ? pitch : static_cast<uint32_t>(kNVecs);
  const uint64_t vecs = static_cast<uint64_t>(t.m) * t.heads * (kNVecs + kRVecs);
  const unsigned blocks = blocks_for(vecs);
  concat_kernel<kNVecs, kRVecs><<<blocks, kThreads, 0, stream>>>(reinterpret_cast<const uint4*>(o.bmm_out), t.q_pe,
                                                                 t.q_pe_stride_m, t.q_pe_stride_h,
                                                                 reinterpret_cast<uint4*>(o.bf16_out), t.m, t.heads,
                                                                 stride_m, stride_h);
  BENCH_CUDA(cudaGetLastError());
  if (!e4m3_out) return;

  enqueue_quant<kRowVecsFixed>(o, vecs, t.row_vecs, quant, stream);
}

}  // namespace

int staged_kernel_count(bool e4m3_out, StagedQuant quant, StagedBmm bmm) {
  const int after_bmm = bmm == StagedBmm::kInto ? 0 : 1;
  if (!e4m3_out) return 1 + after_bmm;
  return 1 + after_bmm + (quant == StagedQuant::kFused ? 1 : 4);
}

void enqueue_staged(cublasHandle_t cublas, const StagedTensors& t, bool e4m3_out, StagedQuant quant,
                    cudaStream_t stream) {
  // Checked before anything is enqueued: a throw in the middle would leave a capture half made.
  if (t.out.out_pitch < kNR || t.out.out_pitch % kVec != 0) throw BenchError("enqueue_staged: bad out_pitch");
  const int H = t.heads, K = t.nope, M = t.m;
  const int64_t q_stride_h = K + kR;                          // q_nope.transpose(0, 1): [H, M, K]
  const int64_t q_stride_m = static_cast<int64_t>(H) * (K + kR);

  // Row-major bmm_out[h] (M x N) = q_nope[h] (M x K) @ w[h] (K x N), written column-major as
  // bmm_out[h]^T (N x M) = w[h]^T (N x K) * q_nope[h]^T (K x M): what torch.bmm asks cuBLAS for.
  const float alpha = 1.0f, beta = 0.0f;
  BENCH_CUBLAS(cublasGemmStridedBatchedEx(cublas, CUBLAS_OP_N, CUBLAS_OP_N, kN, M, K, &alpha, t.w, CUDA_R_16BF,
                                          static_cast<int>(t.w_stride_k), static_cast<long long>(t.w_stride_h),
                                          t.q, CUDA_R_16BF, static_cast<int>(q_stride_m),
                                          static_cast<long long>(q_stride_h), &beta, t.out.bmm_out, CUDA_R_16BF, kN,
                                          static_cast<long long>(M) * kN, H, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));

  const CopyAndQuant c{t.out, M, H, true, kRowVecs, t.q + K, q_stride_m, q_stride_h};
  enqueue_copy_and_quant<kN / kVec, kR / kVec, kRowVecs>(c, e4m3_out, quant, stream);
}

void enqueue_staged(cublasHandle_t cublas, const StagedOprojTensors& t, bool e4m3_out, StagedQuant quant,
                    cudaStream_t stream) {
  const int H = t.heads, V = t.v, M = t.m;
  if ((V != 128 && V != 256) || t.out.out_pitch < H * V || t.out.out_pitch % kVec != 0 ||
      static_cast<uint64_t>(M) * H * V / kVec > UINT32_MAX)
    throw BenchError("enqueue_staged: bad v_head_dim, out_pitch or size");

  // Row-major bmm_out[h] (M x V) = o[h] (M x L, rows o_stride_m apart) @ W_UV[h] (L x V, stored
  // as V rows of L): column-major bmm_out[h]^T (V x M) = W_UV[h]^T (V x L, the stored rows,
  // transposed) * o[h]^T (L x M).  What torch.bmm(o.transpose(0, 1), w_uv) asks cuBLAS for.
  // kInto: the same product into the transposed view of [M, H, V] (head h's columns V apart
  // within each row): the pitched output itself for bf16, else the contiguous temporary.
  const bool into = t.bmm == StagedBmm::kInto;
  uint16_t* c = into ? t.out.bf16_out : t.out.bmm_out;
  const int ldc = !into ? V : (e4m3_out ? H * V : t.out.out_pitch);
  const long long stride_c = into ? V : static_cast<long long>(M) * V;
  const float alpha = 1.0f, beta = 0.0f;
  BENCH_CUBLAS(cublasGemmStridedBatchedEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, V, M, kN, &alpha, t.w, CUDA_R_16BF,
                                          static_cast<int>(t.w_stride_v), static_cast<long long>(t.w_stride_h),
                                          t.o, CUDA_R_16BF, static_cast<int>(t.o_stride_m),
                                          static_cast<long long>(t.o_stride_h), &beta, c, CUDA_R_16BF, ldc, stride_c,
                                          H, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  if (into) {
    const uint32_t row_vecs = static_cast<uint32_t>(H * V / kVec);
    if (e4m3_out) enqueue_quant<0>(t.out, static_cast<uint64_t>(M) * row_vecs, row_vecs, quant, stream);
    return;
  }

  const CopyAndQuant cq{t.out, M, H, false, static_cast<uint32_t>(H * V / kVec)};
  if (V == 128) {
    enqueue_copy_and_quant<128 / kVec, 0, 0>(cq, e4m3_out, quant, stream);
  } else {
    enqueue_copy_and_quant<256 / kVec, 0, 0>(cq, e4m3_out, quant, stream);
  }
}

}  // namespace spark_bench

// The staged arm: the MLA query projection the way inference servers run it today with
// PyTorch, so spark can be timed against it in the same process.
//
//   bmm_out = torch.bmm(q_nope.transpose(0, 1), w)      cublasGemmStridedBatchedEx, bf16 in/out,
//                                                        CUBLAS_COMPUTE_32F, [H, M, N]
//   cat_out = torch.cat([bmm_out.transpose(0, 1), q_pe], -1)   one concat kernel, [M, H, N+R] bf16
//   out     = (cat_out.float() / scale).clamp(-448, 448).to(e4m3)   e4m3 output only:
//               kFused: one kernel, x * (1/scale) (spark's rule, a torch.compile'd server's shape)
//               kEager: four kernels like eager PyTorch (to float, divide, clamp, to e4m3)
//
// The output (cat_out for bf16, out for e4m3) is the same view of a pitched buffer that spark
// writes: rows (m, h) out_pitch elements apart, the pad columns never written.  The e4m3 path's
// concat and fp32 temporaries are contiguous, as PyTorch allocates them.
//
// The concat and quant kernels are vectorised (16-byte accesses) and coalesced: at least as
// fast as PyTorch's own, never deliberately slow.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace spark_bench {

enum class StagedQuant { kFused, kEager };

// Every pointer is a device pointer; bf16 and e4m3 tensors are passed as raw bits.
struct StagedTensors {
  int heads = 0, nope = 0, m = 0;  // H, K, M (N = 512, R = 64)
  int out_pitch = 576;             // elements between output rows (m, h): >= N+R, a multiple of 8
  const uint16_t* q = nullptr;     // [M, H, K+R] bf16, token-major: q_nope = q, q_pe = q + K
  const uint16_t* w = nullptr;     // bf16 [H, K, N] view (w_stride_h, w_stride_k; N contiguous)
  int64_t w_stride_h = 0, w_stride_k = 0;
  uint16_t* bmm_out = nullptr;     // [H, M, N] bf16 scratch
  uint16_t* cat_out = nullptr;     // [M, H, N+R] bf16: the output itself for bf16 output (rows
                                   // out_pitch apart), else a contiguous temporary
  uint8_t* out_e4m3 = nullptr;     // [M, H, N+R] e4m3, rows out_pitch apart (e4m3 output only)
  float* f32_a = nullptr;          // [M, H, N+R] fp32 scratch (kEager only)
  float* f32_b = nullptr;          // [M, H, N+R] fp32 scratch (kEager only)
  const float* q_scale = nullptr;  // device fp32 scalar (e4m3 output only)
};

// Enqueues one layer of the staged path on stream (cuBLAS must already be bound to it, with
// a workspace, so the calls can be captured in a CUDA graph).  Throws BenchError.
void enqueue_staged(cublasHandle_t cublas, const StagedTensors& t, bool e4m3_out, StagedQuant quant,
                    cudaStream_t stream);

// Kernels launched per layer by enqueue_staged (for the report).
int staged_kernel_count(bool e4m3_out, StagedQuant quant);

}  // namespace spark_bench

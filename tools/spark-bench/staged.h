// The staged arm: each op the way inference servers run it today with PyTorch, so spark can be
// timed against it in the same process.  The query projection:
//
//   bmm_out = torch.bmm(q_nope.transpose(0, 1), w)      cublasGemmStridedBatchedEx, bf16 in/out,
//                                                        CUBLAS_COMPUTE_32F, [H, M, N]
//   cat_out = torch.cat([bmm_out.transpose(0, 1), q_pe], -1)   one concat kernel, [M, H, N+R] bf16
//   out     = (cat_out.float() / scale).clamp(-448, 448).to(e4m3)   e4m3 output only:
//               kFused: one kernel, x * (1/scale) (spark's rule, a torch.compile'd server's shape)
//               kEager: four kernels like eager PyTorch (to float, divide, clamp, to e4m3)
//
// The value up-projection:
//
//   bmm_out  = torch.bmm(o.transpose(0, 1), w_uv)       the same cuBLAS call, [H, M, V]
//   flat_out = bmm_out.transpose(0, 1).reshape(M, H*V)   one copy kernel, [M, H*V] bf16
//   out      = the same quantisation as above              e4m3 output only
//
// or, StagedBmm::kInto (what a server that passes bmm an `out=` view does), the bmm writes
// the transposed view of [M, H, V] directly (ldc H*V, or out's pitch) and no copy runs.
//
// The output (cat_out / flat_out for bf16, out for e4m3) is the same view of a pitched buffer
// that spark writes: rows ((m, h) for the query projection, m for the value up-projection)
// out_pitch elements apart, the pad columns never written.  The e4m3 path's concat (or copy)
// and fp32 temporaries are contiguous, as PyTorch allocates them.
//
// The concat, copy and quant kernels are vectorised (16-byte accesses) and coalesced: at least
// as fast as PyTorch's own, never deliberately slow.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace spark_bench {

enum class StagedQuant { kFused, kEager };
// The value up-projection's bmm: into [H, M, V] then a transpose copy, or into the output's
// transposed view.
enum class StagedBmm { kCopy, kInto };

// Every pointer is a device pointer; bf16 and e4m3 tensors are passed as raw bits.

// What either op's staged arm writes after its bmm; the output "rows" are (m, h) for the query
// projection ([M, H, N+R]) and m for the value up-projection ([M, H*V]).
struct StagedOutputs {
  int out_pitch = 0;             // elements between output rows: >= the row, a multiple of 8
  uint16_t* bmm_out = nullptr;   // [H, M, N] or [H, M, V] bf16 scratch
  uint16_t* bf16_out = nullptr;  // the concat's or transpose copy's bf16 output: the output itself
                                 // for bf16 output (rows out_pitch apart), else a contiguous temporary
  uint8_t* out_e4m3 = nullptr;   // e4m3 output, rows out_pitch apart (e4m3 output only)
  float* f32_a = nullptr;        // fp32 scratch as large as the output, contiguous (kEager only)
  float* f32_b = nullptr;        // the same
  const float* scale = nullptr;  // device fp32 scalar (e4m3 output only)
};

// The query projection's tensors (N = 512, R = 64).
struct StagedTensors {
  int heads = 0, nope = 0, m = 0;  // H, K, M
  const uint16_t* q = nullptr;     // [M, H, K+R] bf16, token-major: q_nope = q, q_pe = q + K
  const uint16_t* w = nullptr;     // bf16 [H, K, N] view (w_stride_h, w_stride_k; N contiguous)
  int64_t w_stride_h = 0, w_stride_k = 0;
  StagedOutputs out;
};

// The value up-projection's tensors (L = 512).
struct StagedOprojTensors {
  int heads = 0, v = 0, m = 0;  // H, V, M
  const uint16_t* o = nullptr;  // [M, H, L] bf16 view (o_stride_m, o_stride_h; L contiguous)
  int64_t o_stride_m = 0, o_stride_h = 0;
  const uint16_t* w = nullptr;  // bf16 W_UV[h, l, v] at w[h*w_stride_h + v*w_stride_v + l]
  int64_t w_stride_h = 0, w_stride_v = 0;
  StagedBmm bmm = StagedBmm::kCopy;
  StagedOutputs out;
};

// Enqueues one layer of the staged path on stream (cuBLAS must already be bound to it, with
// a workspace, so the calls can be captured in a CUDA graph).  Throws BenchError.
void enqueue_staged(cublasHandle_t cublas, const StagedTensors& t, bool e4m3_out, StagedQuant quant,
                    cudaStream_t stream);
void enqueue_staged(cublasHandle_t cublas, const StagedOprojTensors& t, bool e4m3_out, StagedQuant quant,
                    cudaStream_t stream);

// Kernels launched per layer by enqueue_staged, either op (for the report; the query
// projection's bmm is always kCopy).
int staged_kernel_count(bool e4m3_out, StagedQuant quant, StagedBmm bmm = StagedBmm::kCopy);

}  // namespace spark_bench

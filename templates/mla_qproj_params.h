// The kernel parameters of the MLA query projection, passed by value to every kernel
// family.  One plain struct that host C++17 and the device templates (NVRTC, nvcc) both
// include, so the host fills exactly the layout the kernels read.  Tensor pointers are
// untyped here; the device code reads them as their element types (bf16 bits, e4m3 and
// E8M0 bytes).  Strides are in elements of the tensor they step through.
#pragma once

namespace spark {

struct MlaQprojParams {
  const void* q_nope;  // bf16 [heads, M, K] through its strides
  long long q_nope_stride_h, q_nope_stride_m;
  const void* w;  // bf16 or e4m3 [heads, K, N]
  long long w_stride_h, w_stride_k;
  // MXFP8: E8M0 bytes [heads, K, N / 32].  Block FP8: fp32 scales [blocks, N / 128] of the
  // packed weight; w_scale_stride_h is then the pack's rows per head, and w_scale_stride_k
  // the scale rows' stride in floats (spark.h states the rule).
  const void* w_scale;
  long long w_scale_stride_h, w_scale_stride_k;
  const void* q_pe;  // bf16 [M, heads, R]
  long long q_pe_stride_m, q_pe_stride_h;
  void* out;  // bf16 or e4m3 [M, heads, N + R]
  long long out_stride_m, out_stride_h;
  const float* q_scale;  // e4m3 output: the device float the outputs are divided by
  int m;
  int heads;
  int m_chunks;  // weight-stationary schedule: M-tile ranges per (head, N block)
};

}  // namespace spark

// The kernel parameters of the MLA value up-projection, one plain struct that the host
// (ops/mla_oproj/plan.cpp) fills and the device templates read.  Strides are in elements of
// the tensor they step through (spark.h states every rule).
#pragma once

namespace spark {

struct MlaOprojParams {
  const void* o;  // bf16 [M, heads, L]
  long long o_stride_m, o_stride_h;
  const void* w;  // bf16 or e4m3: W_UV[h, l, v] at w[h * w_stride_h + v * w_stride_v + l]
  long long w_stride_h, w_stride_v;
  // MXFP8: E8M0 bytes, (h, v, l) at [h * w_scale_stride_h + v * w_scale_stride_v + l / 32].
  // Block FP8: fp32 [blocks, L / 128] of the packed weight; (h, v) is packed row
  // (h + 1) * w_scale_stride_h - V + v, w_scale_stride_v the scale rows' stride in floats.
  const void* w_scale;
  long long w_scale_stride_h, w_scale_stride_v;
  void* out;  // bf16 or e4m3 [M, heads * V]
  long long out_stride_m;
  const float* out_scale;  // e4m3 output: the device float the outputs are divided by
  int m;
  int heads;
  int m_chunks;  // the weight-stationary schedule: M ranges per (head, column block)
};

}  // namespace spark

// spark_mla_qproj_can_implement on raw struct bytes, as a C caller may fill them (any int in
// the enum fields, any pointer, any stride).  The input is
//
//   byte 0   desc.struct_size: bit 7 set -> sizeof(spark_mla_qproj_desc), else bits 0-6 x 2
//            (so sizes too small, exact and larger all occur)
//   byte 1   args.struct_size: bit 7 set -> sizeof(spark_mla_qproj_args), else bits 0-5 x 4;
//            bit 6 set (and bit 7 clear) -> args = NULL (a descriptor-only check)
//   then     sizeof(spark_mla_qproj_desc) bytes of desc, sizeof(spark_mla_qproj_args) bytes
//            of args (x86-64: 32 + 144), zeros where the input is shorter
//
// It must never crash (the library is built with ASan + UBSan here), must return SUCCESS,
// INVALID_ARGUMENT or UNSUPPORTED, with "" or a message naming the argument in
// spark_last_error(); and what it accepts must really keep out apart from every input
// (checked here in 128 bits, with nothing wrapping at 2^64).

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "spark/spark.h"
#include "fuzz_views.h"

namespace {

using spark_fuzz::as_int;
using spark_fuzz::u128;
using spark_fuzz::check_views;
using spark_fuzz::View;
using spark_fuzz::view;

// The views an accepted call spans: all inside the address space, out apart from the rest.
void check_accepted(const spark_mla_qproj_desc& d, const spark_mla_qproj_args& a) {
  const int32_t wf = as_int(&d.weight_format), od = as_int(&d.out_dtype);
  if ((wf != SPARK_WEIGHTS_BF16 && wf != SPARK_WEIGHTS_MXFP8 && wf != SPARK_WEIGHTS_FP8_BLOCK128) ||
      (od != SPARK_DTYPE_BF16 && od != SPARK_DTYPE_E4M3))
    __builtin_trap();
  const bool mx = wf == SPARK_WEIGHTS_MXFP8, block = wf == SPARK_WEIGHTS_FP8_BLOCK128;
  const bool e4m3 = od == SPARK_DTYPE_E4M3;
  const int64_t H = d.heads, K = d.nope_dim, N = d.latent_dim, R = d.rope_dim, M = a.m;
  if (M < 1 || M > 8192 || !a.q_nope || !a.w || !a.q_pe || !a.out || ((mx || block) && !a.w_scale) || (e4m3 && !a.q_scale))
    __builtin_trap();
  const View out = view(a.out, M, a.out_stride_m, H, a.out_stride_h, N + R, e4m3 ? 1 : 2);
  View inputs[5] = {
      view(a.q_nope, H, a.q_nope_stride_h, M, a.q_nope_stride_m, K, 2),
      view(a.w, H, a.w_stride_h, K, a.w_stride_k, N, mx || block ? 1 : 2),
      view(a.q_pe, M, a.q_pe_stride_m, H, a.q_pe_stride_h, R, 2),
      {0, 0},
      {0, 0},
  };
  if (mx) inputs[3] = view(a.w_scale, H, a.w_scale_stride_h, K, a.w_scale_stride_k, N / 32, 1);
  if (block) {  // the block rows that packed rows 0 .. (H-1) * rows_per_head + K - 1 fall in
    if (a.w_scale_stride_h < K || a.w_scale_stride_k < N / 128) __builtin_trap();
    const int64_t block_rows = ((H - 1) * a.w_scale_stride_h + K - 1) / 128 + 1;
    inputs[3] = view(a.w_scale, block_rows, a.w_scale_stride_k, 1, 0, N / 128, 4);
  }
  if (e4m3) inputs[4] = View{reinterpret_cast<uintptr_t>(a.q_scale), reinterpret_cast<uintptr_t>(a.q_scale) + u128{4}};
  check_views(out, inputs);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  spark_mla_qproj_desc desc;
  spark_mla_qproj_args args;
  const bool with_args = spark_fuzz::frame(data, size, desc, args);
  const spark_status status = spark_mla_qproj_can_implement(&desc, with_args ? &args : nullptr);
  // Every refusal's message starts with "argument '<name>': " (the op's validate.h).
  spark_fuzz::check_status(status, spark_last_error());
  if (status == SPARK_SUCCESS && with_args) check_accepted(desc, args);
  return 0;
}

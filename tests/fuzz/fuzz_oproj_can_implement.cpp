// spark_mla_oproj_can_implement on raw struct bytes, as a C caller may fill them (any int in
// the enum fields, any pointer, any stride).  The input is
//
//   byte 0   desc.struct_size: bit 7 set -> sizeof(spark_mla_oproj_desc), else bits 0-6 x 2
//   byte 1   args.struct_size: bit 7 set -> sizeof(spark_mla_oproj_args), else bits 0-5 x 4;
//            bit 6 set (and bit 7 clear) -> args = NULL (a descriptor-only check)
//   then     sizeof(spark_mla_oproj_desc) bytes of desc, sizeof(spark_mla_oproj_args) bytes
//            of args (x86-64: 32 + 112), zeros where the input is shorter
//
// It must never crash, must return SUCCESS, INVALID_ARGUMENT or UNSUPPORTED with "" or a
// message naming the argument, and what it accepts must keep out apart from every input
// (checked here in 128 bits).

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
void check_accepted(const spark_mla_oproj_desc& d, const spark_mla_oproj_args& a) {
  const int32_t wf = as_int(&d.weight_format), od = as_int(&d.out_dtype);
  if ((wf != SPARK_WEIGHTS_BF16 && wf != SPARK_WEIGHTS_MXFP8 && wf != SPARK_WEIGHTS_FP8_BLOCK128) ||
      (od != SPARK_DTYPE_BF16 && od != SPARK_DTYPE_E4M3))
    __builtin_trap();
  const bool mx = wf == SPARK_WEIGHTS_MXFP8, block = wf == SPARK_WEIGHTS_FP8_BLOCK128;
  const bool e4m3 = od == SPARK_DTYPE_E4M3;
  const int64_t H = d.heads, L = d.latent_dim, V = d.v_head_dim, M = a.m;
  if (M < 1 || M > 8192 || !a.o || !a.w || !a.out || ((mx || block) && !a.w_scale) || (e4m3 && !a.out_scale))
    __builtin_trap();
  if (a.out_stride_m < H * V) __builtin_trap();  // rows of out would overlap
  const View out = view(a.out, M, a.out_stride_m, 1, 0, H * V, e4m3 ? 1 : 2);
  View inputs[4] = {
      view(a.o, M, a.o_stride_m, H, a.o_stride_h, L, 2),
      view(a.w, H, a.w_stride_h, V, a.w_stride_v, L, mx || block ? 1 : 2),
      {0, 0},
      {0, 0},
  };
  if (mx) inputs[2] = view(a.w_scale, H, a.w_scale_stride_h, V, a.w_scale_stride_v, L / 32, 1);
  if (block) {  // the block rows that the pack's rows 0 .. H * rows_per_head - 1 fall in
    if (a.w_scale_stride_h < V || a.w_scale_stride_v < L / 128) __builtin_trap();
    const int64_t block_rows = (H * a.w_scale_stride_h - 1) / 128 + 1;
    inputs[2] = view(a.w_scale, block_rows, a.w_scale_stride_v, 1, 0, L / 128, 4);
  }
  if (e4m3)
    inputs[3] = View{reinterpret_cast<uintptr_t>(a.out_scale), reinterpret_cast<uintptr_t>(a.out_scale) + u128{4}};
  check_views(out, inputs);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  spark_mla_oproj_desc desc;
  spark_mla_oproj_args args;
  const bool with_args = spark_fuzz::frame(data, size, desc, args);
  const spark_status status = spark_mla_oproj_can_implement(&desc, with_args ? &args : nullptr);
  // Every refusal's message starts with "argument '<name>': " (the op's validate.h).
  spark_fuzz::check_status(status, spark_last_error());
  if (status == SPARK_SUCCESS && with_args) check_accepted(desc, args);
  return 0;
}

#include "ops/mla_oproj/validate.h"

#include <cstdint>

#include "core/c_enum.h"
#include "core/error.h"
#include "ops/common/views.h"
#include "ops/mla_oproj/key.h"

namespace spark::oproj {

namespace {

// Block FP8's scale array: the block rows that the W_UV rows of heads 0..H-1 (packed rows
// (h + 1) * rows_per_head - V + v) fall in, L / 128 fp32 scales each.  Up to 2^40 block rows
// of up to 2^40 floats: the extent is computed in 128 bits.
Span block_scale_span(const void* p, int64_t H, int64_t L, int64_t rows_per_head, int64_t row_stride) {
  const int64_t block_rows = (H * rows_per_head - 1) / 128 + 1;
  const unsigned __int128 bytes =
      (static_cast<unsigned __int128>(block_rows - 1) * static_cast<unsigned __int128>(row_stride) +
       static_cast<unsigned __int128>(L / 128)) *
      4;
  SPARK_CHECK_ARG(bytes <= UINTPTR_MAX - address_of(p), "w_scale",
                  "the view extends past the end of the address space (base {}, {} block rows of stride {})", p,
                  block_rows, row_stride);
  return checked_span("w_scale", p, static_cast<uintptr_t>(bytes));
}

}  // namespace

void validate_desc(const spark_mla_oproj_desc* desc) {
  SPARK_CHECK_ARG(desc != nullptr, "desc", "must not be NULL");
  SPARK_CHECK_ARG(desc->struct_size >= sizeof(spark_mla_oproj_desc), "struct_size",
                  "desc->struct_size is {}, expected sizeof(spark_mla_oproj_desc) = {}", desc->struct_size,
                  sizeof(spark_mla_oproj_desc));
  check_formats(desc->weight_format, desc->out_dtype);
  const std::string shape = shape_problem(desc->heads, desc->latent_dim, desc->v_head_dim);
  SPARK_CHECK(shape.empty(), SPARK_ERROR_UNSUPPORTED, "{}", shape);
}

void validate_args(const spark_mla_oproj_desc& d, const spark_mla_oproj_args* a, int max_m) {
  SPARK_CHECK_ARG(a != nullptr, "args", "must not be NULL");
  SPARK_CHECK_ARG(a->struct_size >= sizeof(spark_mla_oproj_args), "struct_size",
                  "args->struct_size is {}, expected sizeof(spark_mla_oproj_args) = {}", a->struct_size,
                  sizeof(spark_mla_oproj_args));
  check_m(a->m, kMaxM, max_m);

  const int64_t H = d.heads, M = a->m, L = d.latent_dim, V = d.v_head_dim;
  const bool e4m3_out = enum_value(d.out_dtype) == SPARK_DTYPE_E4M3;
  const int32_t format = enum_value(d.weight_format);
  const bool mxfp8 = format == SPARK_WEIGHTS_MXFP8;
  const bool block = format == SPARK_WEIGHTS_FP8_BLOCK128;
  const bool fp8 = mxfp8 || block;

  SPARK_CHECK_ARG(a->o, "o", "must not be NULL");
  SPARK_CHECK_ARG(a->w, "w", "must not be NULL");
  SPARK_CHECK_ARG(a->out, "out", "must not be NULL");
  check_scale_pointers(a->w_scale, d.weight_format, a->out_scale, d.out_dtype, "out_scale");

  check_aligned(a->o, "o", 16);
  check_aligned(a->w, "w", 16);
  check_aligned(a->out, "out", 16);

  check_stride(a->o_stride_m, "o_stride_m", 8, L, "latent_dim");
  check_stride(a->o_stride_h, "o_stride_h", 8, L, "latent_dim");
  const int64_t w_multiple = fp8 ? 16 : 8;
  check_stride(a->w_stride_h, "w_stride_h", w_multiple, L, "latent_dim");
  check_stride(a->w_stride_v, "w_stride_v", w_multiple, L, "latent_dim");
  if (mxfp8) {
    check_aligned(a->w_scale, "w_scale", 4);
    check_stride(a->w_scale_stride_h, "w_scale_stride_h", 4, L / 32, "latent_dim / 32");
    check_stride(a->w_scale_stride_v, "w_scale_stride_v", 4, L / 32, "latent_dim / 32");
  } else if (block) {
    check_aligned(a->w_scale, "w_scale", 4);
    // Counted in packed rows (stride_h) and floats (stride_v): no multiple is asked of them.
    check_stride(a->w_scale_stride_h, "w_scale_stride_h", 1, V, "v_head_dim: the packed rows of one head");
    check_stride(a->w_scale_stride_v, "w_scale_stride_v", 1, L / 128, "latent_dim / 128: one scale per block");
  }
  check_stride(a->out_stride_m, "out_stride_m", 8, H * V, "heads x v_head_dim");

  const int64_t out_bytes = e4m3_out ? 1 : 2;
  const Span out = span("out", a->out, M, a->out_stride_m, 1, 1, H * V, out_bytes);
  const Span inputs[] = {
      span("o", a->o, M, a->o_stride_m, H, a->o_stride_h, L, 2),
      span("w", a->w, H, a->w_stride_h, V, a->w_stride_v, L, fp8 ? 1 : 2),
      mxfp8   ? span("w_scale", a->w_scale, H, a->w_scale_stride_h, V, a->w_scale_stride_v, L / 32, 1)
      : block ? block_scale_span(a->w_scale, H, L, a->w_scale_stride_h, a->w_scale_stride_v)
              : Span{"w_scale", 0, 0},
      e4m3_out ? checked_span("out_scale", a->out_scale, 4) : Span{"out_scale", 0, 0},
  };
  for (const Span& in : inputs) {
    SPARK_CHECK_ARG(!overlaps(out, in), "out", "overlaps {}: the output must not alias any input", in.name);
  }
}

}  // namespace spark::oproj

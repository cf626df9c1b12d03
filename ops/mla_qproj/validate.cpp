#include "ops/mla_qproj/validate.h"

#include <cstdint>

#include "core/error.h"
#include "ops/common/views.h"

namespace spark {

namespace {

// out's rows (m, h), each `row` elements at m * stride_m + h * stride_h, are disjoint when
// the dimension with the larger stride steps past the whole extent of the other (with equal
// strides, m is taken as the outer one).  Two CTAs writing the same bytes would race.
void check_rows_disjoint(int64_t m, int64_t stride_m, int64_t h, int64_t stride_h, int64_t row) {
  if (m == 1 || h == 1) return;  // one row per step of the other dimension: the stride rule suffices
  const bool m_outer = stride_m >= stride_h;
  const int64_t inner_count = m_outer ? h : m, inner_stride = m_outer ? stride_h : stride_m;
  const int64_t outer_stride = m_outer ? stride_m : stride_h;
  const int64_t need = (inner_count - 1) * inner_stride + row;
  SPARK_CHECK_ARG(outer_stride >= need, m_outer ? "out_stride_m" : "out_stride_h",
                  "must be >= {} ({} - 1) x {} + latent_dim + rope_dim) so the rows of out do not overlap "
                  "(got {})",
                  need, m_outer ? "(heads" : "(m", m_outer ? "out_stride_h" : "out_stride_m", outer_stride);
}

// Block FP8's scale array: the block rows that packed rows 0 .. (H-1) * rows_per_head + K - 1
// fall in, N / 128 fp32 scales each.
// Up to 2^40 block rows of up to 2^40 floats: the extent is computed in 128 bits.
Span block_scale_span(const void* p, int64_t H, int64_t K, int64_t N, int64_t rows_per_head, int64_t row_stride) {
  const int64_t block_rows = ((H - 1) * rows_per_head + K - 1) / 128 + 1;
  const unsigned __int128 bytes =
      (static_cast<unsigned __int128>(block_rows - 1) * static_cast<unsigned __int128>(row_stride) +
       static_cast<unsigned __int128>(N / 128)) *
      4;
  SPARK_CHECK_ARG(bytes <= UINTPTR_MAX - address_of(p), "w_scale",
                  "the view extends past the end of the address space (base {}, {} block rows of stride {})", p,
                  block_rows, row_stride);
  return checked_span("w_scale", p, static_cast<uintptr_t>(bytes));
}

}  // namespace

void validate_desc(const spark_mla_qproj_desc* desc) {
  SPARK_CHECK_ARG(desc != nullptr, "desc", "must not be NULL");
  SPARK_CHECK_ARG(desc->struct_size >= sizeof(spark_mla_qproj_desc), "struct_size",
                  "desc->struct_size is {}, expected sizeof(spark_mla_qproj_desc) = {}", desc->struct_size,
                  sizeof(spark_mla_qproj_desc));
  check_formats(desc->weight_format, desc->out_dtype);
  const std::string shape = shape_problem(desc->heads, desc->nope_dim, desc->latent_dim, desc->rope_dim);
  SPARK_CHECK(shape.empty(), SPARK_ERROR_UNSUPPORTED, "{}", shape);
}

void validate_args(const spark_mla_qproj_desc& d, const spark_mla_qproj_args* a, int max_m) {
  SPARK_CHECK_ARG(a != nullptr, "args", "must not be NULL");
  SPARK_CHECK_ARG(a->struct_size >= sizeof(spark_mla_qproj_args), "struct_size",
                  "args->struct_size is {}, expected sizeof(spark_mla_qproj_args) = {}", a->struct_size,
                  sizeof(spark_mla_qproj_args));
  check_m(a->m, kMaxM, max_m);

  const int64_t H = d.heads, M = a->m, K = d.nope_dim, N = d.latent_dim, R = d.rope_dim;
  const bool e4m3_out = enum_value(d.out_dtype) == SPARK_DTYPE_E4M3;
  const int32_t format = enum_value(d.weight_format);
  const bool mxfp8 = format == SPARK_WEIGHTS_MXFP8;
  const bool block = format == SPARK_WEIGHTS_FP8_BLOCK128;
  const bool fp8 = mxfp8 || block;

  SPARK_CHECK_ARG(a->q_nope, "q_nope", "must not be NULL");
  SPARK_CHECK_ARG(a->w, "w", "must not be NULL");
  SPARK_CHECK_ARG(a->q_pe, "q_pe", "must not be NULL");
  SPARK_CHECK_ARG(a->out, "out", "must not be NULL");
  check_scale_pointers(a->w_scale, d.weight_format, a->q_scale, d.out_dtype, "q_scale");

  check_aligned(a->q_nope, "q_nope", 16);
  check_aligned(a->w, "w", 16);
  check_aligned(a->q_pe, "q_pe", 16);
  check_aligned(a->out, "out", 16);

  check_stride(a->q_nope_stride_h, "q_nope_stride_h", 8, K, "nope_dim");
  check_stride(a->q_nope_stride_m, "q_nope_stride_m", 8, K, "nope_dim");
  const int64_t w_multiple = fp8 ? 16 : 8;
  check_stride(a->w_stride_h, "w_stride_h", w_multiple, N, "latent_dim");
  check_stride(a->w_stride_k, "w_stride_k", w_multiple, N, "latent_dim");
  if (mxfp8) {
    check_aligned(a->w_scale, "w_scale", 4);
    check_stride(a->w_scale_stride_h, "w_scale_stride_h", 4, N / 32, "latent_dim / 32");
    check_stride(a->w_scale_stride_k, "w_scale_stride_k", 4, N / 32, "latent_dim / 32");
  } else if (block) {
    check_aligned(a->w_scale, "w_scale", 4);
    // Counted in packed rows (stride_h) and floats (stride_k): no multiple is asked of them.
    check_stride(a->w_scale_stride_h, "w_scale_stride_h", 1, K, "nope_dim: the packed rows of one head");
    check_stride(a->w_scale_stride_k, "w_scale_stride_k", 1, N / 128, "latent_dim / 128: one scale per block");
  }
  check_stride(a->q_pe_stride_m, "q_pe_stride_m", 8, R, "rope_dim");
  check_stride(a->q_pe_stride_h, "q_pe_stride_h", 8, R, "rope_dim");
  check_stride(a->out_stride_m, "out_stride_m", 8, N + R, "latent_dim + rope_dim");
  check_stride(a->out_stride_h, "out_stride_h", 8, N + R, "latent_dim + rope_dim");
  check_rows_disjoint(M, a->out_stride_m, H, a->out_stride_h, N + R);

  const int64_t out_bytes = e4m3_out ? 1 : 2;
  const Span out = span("out", a->out, M, a->out_stride_m, H, a->out_stride_h, N + R, out_bytes);
  const Span inputs[] = {
      span("q_nope", a->q_nope, H, a->q_nope_stride_h, M, a->q_nope_stride_m, K, 2),
      span("w", a->w, H, a->w_stride_h, K, a->w_stride_k, N, fp8 ? 1 : 2),
      mxfp8   ? span("w_scale", a->w_scale, H, a->w_scale_stride_h, K, a->w_scale_stride_k, N / 32, 1)
      : block ? block_scale_span(a->w_scale, H, K, N, a->w_scale_stride_h, a->w_scale_stride_k)
              : Span{"w_scale", 0, 0},
      span("q_pe", a->q_pe, M, a->q_pe_stride_m, H, a->q_pe_stride_h, R, 2),
      e4m3_out ? checked_span("q_scale", a->q_scale, 4) : Span{"q_scale", 0, 0},
  };
  for (const Span& in : inputs) {
    SPARK_CHECK_ARG(!overlaps(out, in), "out", "overlaps {}: the output must not alias any input", in.name);
  }
}

}  // namespace spark

// Host-side checks every op's argument validation shares: strides, alignment, and the
// byte ranges of strided views (for "the output must not alias an input").  Failures throw
// spark::Error whose message starts with "argument '<name>': ".
#pragma once

#include <cstdint>

#include "spark/spark.h"

namespace spark {

// Strides beyond this are rejected, so byte extents computed from them never overflow.
inline constexpr int64_t kMaxStride = int64_t(1) << 40;

uintptr_t address_of(const void* p);

// > 0, <= kMaxStride, a multiple of `multiple` elements (so rows stay aligned) and >= min_value
// (min_rule says why, e.g. "latent_dim").
void check_stride(int64_t stride, const char* name, int64_t multiple, int64_t min_value, const char* min_rule);
void check_aligned(const void* p, const char* name, unsigned alignment);

// A descriptor's enums: one of the spark_weight_format and spark_dtype values.  The C fields
// are taken by reference and read as ints (core/c_enum.h): a caller may store any int there.
void check_formats(const spark_weight_format& weight_format, const spark_dtype& out_dtype);
// A call's M: 1..max_m_call (the op's limit) and <= the plan's max_m.
void check_m(int32_t m, int max_m_call, int max_m_plan);
// w_scale present for the FP8 formats, NULL for bf16; the output scale (named `scale_name`)
// present and 4-byte aligned for e4m3 output.
void check_scale_pointers(const void* w_scale, const spark_weight_format& format, const float* out_scale,
                          const spark_dtype& out_dtype, const char* scale_name);

// The bytes a view spans: [begin, end).
struct Span {
  const char* name;
  uintptr_t begin;
  uintptr_t end;
};
// [p, p + bytes), refused where it would run past the end of the address space.
Span checked_span(const char* name, const void* p, uintptr_t bytes);
// A view of n1 x n2 rows of `inner` elements (strides s1, s2 checked by check_stride first,
// counts <= 8192, so the extent stays inside int64_t).
Span span(const char* name, const void* p, int64_t n1, int64_t s1, int64_t n2, int64_t s2, int64_t inner,
          int64_t elem_bytes);
bool overlaps(const Span& a, const Span& b);

}  // namespace spark

#include "ops/common/views.h"

#include "core/c_enum.h"
#include "core/error.h"

namespace spark {

uintptr_t address_of(const void* p) { return reinterpret_cast<uintptr_t>(p); }

void check_stride(int64_t stride, const char* name, int64_t multiple, int64_t min_value,
                  const char* min_rule) {
  SPARK_CHECK_ARG(stride > 0, name, "must be > 0 (got {})", stride);
  SPARK_CHECK_ARG(stride <= kMaxStride, name, "{} is implausibly large (limit 2^40)", stride);
  SPARK_CHECK_ARG(stride % multiple == 0, name,
                  "must be a multiple of {} elements so every row stays 16-byte aligned (got {})", multiple,
                  stride);
  SPARK_CHECK_ARG(stride >= min_value, name, "must be >= {} ({}) so rows do not overlap (got {})", min_value,
                  min_rule, stride);
}

void check_aligned(const void* p, const char* name, unsigned alignment) {
  SPARK_CHECK_ARG(address_of(p) % alignment == 0, name, "must be {}-byte aligned (address {})", alignment, p);
}

void check_formats(const spark_weight_format& weight_format, const spark_dtype& out_dtype) {
  const int32_t w = enum_value(weight_format);
  SPARK_CHECK_ARG(w == SPARK_WEIGHTS_BF16 || w == SPARK_WEIGHTS_MXFP8 || w == SPARK_WEIGHTS_FP8_BLOCK128,
                  "weight_format",
                  "{} is not a spark_weight_format (SPARK_WEIGHTS_BF16 = 0, SPARK_WEIGHTS_MXFP8 = 1, "
                  "SPARK_WEIGHTS_FP8_BLOCK128 = 2)",
                  w);
  const int32_t o = enum_value(out_dtype);
  SPARK_CHECK_ARG(o == SPARK_DTYPE_BF16 || o == SPARK_DTYPE_E4M3, "out_dtype",
                  "{} is not a spark_dtype (SPARK_DTYPE_BF16 = 0, SPARK_DTYPE_E4M3 = 1)", o);
}

void check_m(int32_t m, int max_m_call, int max_m_plan) {
  SPARK_CHECK_ARG(m >= 1 && m <= max_m_call, "m", "{} is outside 1..{}", m, max_m_call);
  SPARK_CHECK_ARG(m <= max_m_plan, "m", "{} is above the plan's max_m {}", m, max_m_plan);
}

void check_scale_pointers(const void* w_scale, const spark_weight_format& format, const float* out_scale,
                          const spark_dtype& out_dtype, const char* scale_name) {
  const int32_t f = enum_value(format);
  if (f == SPARK_WEIGHTS_MXFP8 || f == SPARK_WEIGHTS_FP8_BLOCK128) {
    SPARK_CHECK_ARG(w_scale, "w_scale", "must not be NULL for {} weights",
                    f == SPARK_WEIGHTS_MXFP8 ? "MXFP8" : "block-FP8");
  } else {
    SPARK_CHECK_ARG(!w_scale, "w_scale", "must be NULL for bf16 weights (scales belong to the FP8 formats)");
  }
  if (enum_value(out_dtype) == SPARK_DTYPE_E4M3) {
    SPARK_CHECK_ARG(out_scale, scale_name, "must not be NULL for e4m3 output");
    check_aligned(out_scale, scale_name, 4);
  }  // bf16 output never reads the scale: any value is ignored
}

// [p, p + bytes), refused where it would run past the end of the address space: computed
// in 64 bits its end would wrap to a small address, and the overlap check would then pass
// views that overlap.
Span checked_span(const char* name, const void* p, uintptr_t bytes) {
  SPARK_CHECK_ARG(bytes <= UINTPTR_MAX - address_of(p), name,
                  "the view extends past the end of the address space (base {}, {} bytes)", p, bytes);
  return Span{name, address_of(p), address_of(p) + bytes};
}

// The strides are checked (positive, <= 2^40) and the counts are <= 8192, so the element
// extent stays far inside int64_t.
Span span(const char* name, const void* p, int64_t n1, int64_t s1, int64_t n2, int64_t s2, int64_t inner,
          int64_t elem_bytes) {
  const int64_t last = (n1 - 1) * s1 + (n2 - 1) * s2 + inner;
  return checked_span(name, p, static_cast<uintptr_t>(last * elem_bytes));
}

bool overlaps(const Span& a, const Span& b) { return a.begin < b.end && b.begin < a.end; }

}  // namespace spark

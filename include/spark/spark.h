/*
 * spark.h -- the public C API of spark, a JIT kernel generator for the MLA query
 * projection ("query absorption") of DeepSeek-V3 / Kimi-K2 / GLM-5 style attention.
 *
 *   out[m, h, 0:N]   = q_nope[h, m, :] @ W[h]        (FP32 accumulation)
 *   out[m, h, N:N+R] = q_pe[m, h, :]
 *
 * in ONE kernel, specialised per shape, compiled by NVRTC into an on-disk cubin cache
 * and launched through the CUDA Driver API, which is loaded with dlopen on first use.
 *
 * Plain C (C99), no CUDA header needed.  Every function returns a spark_status (or is
 * a destroy/query that cannot fail); on failure a message naming the argument and the
 * rule it broke is kept per thread and returned by spark_last_error().
 *
 * Thread rules
 *   - spark_context: fully thread-safe; any thread may create plans on it.
 *   - spark_mla_qproj_plan: spark_mla_qproj_run may be called from any number of
 *     threads at once.  Destroying a plan must not race with a run of that plan.
 *   - A plan must be destroyed before the context it was created on.
 *   - spark_set_log_callback and spark_set_log_level: any thread, at any time.
 *
 * Memory and streams
 *   - All tensor pointers are device pointers in the context's device, in the CUDA
 *     primary context of that device (the one the CUDA runtime and PyTorch use).
 *   - A stream is a CUstream / cudaStream_t of that context; NULL is the legacy
 *     default stream.
 */
#ifndef SPARK_SPARK_H_
#define SPARK_SPARK_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define SPARK_API
#else
#define SPARK_API __attribute__((visibility("default")))
#endif

#define SPARK_VERSION_MAJOR 0
#define SPARK_VERSION_MINOR 1
#define SPARK_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH */
#define SPARK_VERSION_NUMBER \
  (SPARK_VERSION_MAJOR * 10000 + SPARK_VERSION_MINOR * 100 + SPARK_VERSION_PATCH)

/* The version of the library actually loaded (compare with SPARK_VERSION_NUMBER). */
SPARK_API unsigned spark_version_number(void);
/* "MAJOR.MINOR.PATCH"; a static string. */
SPARK_API const char* spark_version_string(void);

/* Status codes.  The values are pinned: they never change between releases. */
typedef enum spark_status {
  SPARK_SUCCESS = 0,
  /* An argument broke a rule; spark_last_error() names the argument and the rule. */
  SPARK_ERROR_INVALID_ARGUMENT = 1,
  /* A well-formed request spark does not implement (shape, format, architecture). */
  SPARK_ERROR_UNSUPPORTED = 2,
  /* No usable CUDA driver (libcuda.so.1 missing) or no such device. */
  SPARK_ERROR_NO_DEVICE = 3,
  /* A CUDA Driver API call failed; the message carries the CUresult name. */
  SPARK_ERROR_CUDA = 4,
  /* NVRTC rejected the generated source (the message carries the compile log), or
   * NVRTC could not be loaded for a kernel that is not in the cache. */
  SPARK_ERROR_COMPILE = 5,
  /* The on-disk cache could not be read or written. */
  SPARK_ERROR_CACHE = 6,
  /* The launch needs a kernel that is not loaded and the stream is capturing a
   * CUDA graph: nothing was compiled, loaded or launched, the capture is intact.
   * Only lazy plans (spark_mla_qproj_plan_options.lazy) can return it. */
  SPARK_ERROR_NOT_LOADED_WHILE_CAPTURING = 7,
  /* SPARK_JIT=0 and the kernel is not in the cache. */
  SPARK_ERROR_JIT_DISABLED = 8,
  /* A host or device allocation failed. */
  SPARK_ERROR_OUT_OF_MEMORY = 9,
  /* A bug in spark. */
  SPARK_ERROR_INTERNAL = 10
} spark_status;

/* A short static description of a status ("invalid argument", ...); never NULL. */
SPARK_API const char* spark_status_string(spark_status status);

/* The message of the last failure on the calling thread; "" if none.  Valid until
 * the next spark call on this thread. */
SPARK_API const char* spark_last_error(void);

/* Weight formats (values pinned). */
typedef enum spark_weight_format {
  /* w: bf16 [H, K, N]. */
  SPARK_WEIGHTS_BF16 = 0,
  /* w: e4m3fn [H, K, N] values; w_scale: e8m0 [H, K, N/32] exponent bytes.
   * Dequantised as RN_bf16(bf16(value) * bf16(2^(byte - 127))). */
  SPARK_WEIGHTS_MXFP8 = 1,
  /* w: e4m3fn [H, K, N] values, a slice of the packed kv_b_proj [rows, N] that DeepSeek-V3/R1,
   * Kimi-K2 and GLM FP8 checkpoints ship; w_scale: their fp32 weight_scale_inv, one scale per
   * 128 x 128 block of the packed weight (a block may straddle two heads).  Dequantised as
   * RN_bf16(float(value) * scale): the fp32 product, rounded once to bf16. */
  SPARK_WEIGHTS_FP8_BLOCK128 = 2
} spark_weight_format;

/* Output element types (values pinned). */
typedef enum spark_dtype {
  /* bf16: the FP32 accumulator rounded to nearest-even. */
  SPARK_DTYPE_BF16 = 0,
  /* e4m3fn: the bf16 result x (1 / *q_scale), clamped to +-448, rounded to
   * nearest-even with saturation; the RoPE part is scaled the same way. */
  SPARK_DTYPE_E4M3 = 1
} spark_dtype;

/* CUstream and cudaStream_t are both pointers to this incomplete type. */
typedef struct CUstream_st* spark_stream;

typedef struct spark_context_s* spark_context;
typedef struct spark_mla_qproj_plan_s* spark_mla_qproj_plan;

/* ------------------------------------------------------------------------- */
/* Logging: process-wide, no device needed.                                   */
/* ------------------------------------------------------------------------- */

/* Message levels, lowest first (values pinned). */
typedef enum spark_log_level {
  SPARK_LOG_TRACE = 0,
  SPARK_LOG_DEBUG = 1,
  /* e.g. a kernel compiled by a prewarm. */
  SPARK_LOG_INFO = 2,
  /* Something the host should fix but spark worked around: a kernel compiled while
   * serving (plan creation or a lazy plan's first run), a corrupt cache entry. */
  SPARK_LOG_WARN = 3,
  /* An operation failed for a reason of the deployment, e.g. a kernel refused under
   * SPARK_JIT=0 (the call also returns the error). */
  SPARK_LOG_ERROR = 4,
  SPARK_LOG_CRITICAL = 5,
  /* As a level: nothing is logged. */
  SPARK_LOG_OFF = 6
} spark_log_level;

/* One message: its level, its text and the user_data given with the callback.  The text
 * is NUL-terminated, has no trailing newline, and is valid only during the call (copy it
 * to keep it). */
typedef void (*spark_log_callback)(spark_log_level level, const char* message, void* user_data);

/* Sends spark's messages to callback instead of stderr; NULL goes back to stderr, where
 * each message is one line with the local time, the pid and the level:
 *   [2026-12-04 07:40:00.123] [spark 12345] [warning] text
 *   - The callback runs on whichever thread is inside spark when the message is logged:
 *     any thread that calls spark, including during spark_context_create,
 *     spark_mla_qproj_plan_create and spark_mla_qproj_run (a kernel compiled, a corrupt
 *     cache entry found).
 *   - Calls are serialised by spark: one at a time, never two threads at once.
 *   - The callback must not call spark.  Messages a spark call from inside it would log are
 *     dropped, spark_set_log_callback from inside it fails with INVALID_ARGUMENT, and other
 *     calls may deadlock.
 *   - Safe at any time, from any thread: the swap waits for a call of the previous callback
 *     in progress, so once this returns the previous callback and its user_data are no
 *     longer used.
 * Messages below the level (spark_set_log_level) reach neither the callback nor stderr.
 * Errors: INVALID_ARGUMENT (called from inside the callback). */
SPARK_API spark_status spark_set_log_callback(spark_log_callback callback, void* user_data);

/* The lowest level that is logged, to the callback and stderr alike; SPARK_LOG_OFF logs
 * nothing.  The initial level comes from the environment variable SPARK_LOG_LEVEL (trace,
 * debug, info, warn, error, critical, off; default warn); this overrides it.
 * Errors: INVALID_ARGUMENT (level outside SPARK_LOG_TRACE..SPARK_LOG_OFF). */
SPARK_API spark_status spark_set_log_level(spark_log_level level);

/* ------------------------------------------------------------------------- */
/* Context: the loaded kernels of one device.                                 */
/* ------------------------------------------------------------------------- */

typedef struct spark_context_options {
  size_t struct_size; /* sizeof(spark_context_options) */
  int32_t device;     /* CUDA device ordinal */
} spark_context_options;
/* Every struct has an initializer that sets struct_size and zeroes the rest, e.g.
 *   spark_context_options opts = SPARK_CONTEXT_OPTIONS_INIT;  (device 0) */
#define SPARK_CONTEXT_OPTIONS_INIT {sizeof(spark_context_options), 0}

/* Creates a context on a device.  opts may be NULL (device 0).  Loads the CUDA
 * driver on first use and retains the device's primary context.
 * Errors: INVALID_ARGUMENT (null out, bad struct_size, negative device),
 * NO_DEVICE (no driver, no such device), CUDA. */
SPARK_API spark_status spark_context_create(const spark_context_options* opts,
                                            spark_context* out);

/* Unloads every module of the context and releases the primary context.
 * spark_context_destroy(NULL) is a no-op.  Must not race with any use of the context. */
SPARK_API void spark_context_destroy(spark_context ctx);

/* The compute capability of the context's device (e.g. 90 for sm_90). */
SPARK_API spark_status spark_context_compute_capability(spark_context ctx, int32_t* out);

/* The kernel cache's counters for one context, since it was created. */
typedef struct spark_cache_stats {
  size_t struct_size;       /* set by the caller: sizeof(spark_cache_stats) */
  uint64_t hits;            /* kernels served from a verified cache entry */
  uint64_t misses;          /* kernels not in the cache (compiled, or refused under SPARK_JIT=0) */
  uint64_t compiles;        /* NVRTC compiles */
  uint64_t corrupt_entries; /* entries that failed verification (moved aside, rebuilt) */
  double compile_ms;        /* time in NVRTC */
  double load_ms;           /* time reading + verifying entries and loading modules onto the device */
} spark_cache_stats;
#define SPARK_CACHE_STATS_INIT {sizeof(spark_cache_stats), 0, 0, 0, 0, 0.0, 0.0}

/* Fills *out with the context's cache counters (`spark-cache stats` shows the totals of
 * every process that used the cache directory).
 * Errors: INVALID_ARGUMENT (null out, out->struct_size smaller than
 * sizeof(spark_cache_stats), null ctx).  Thread-safe; the counters are read one by one,
 * so a snapshot taken during a load may be off by that load. */
SPARK_API spark_status spark_context_cache_stats(spark_context ctx, spark_cache_stats* out);

/* ------------------------------------------------------------------------- */
/* MLA query projection.                                                      */
/* ------------------------------------------------------------------------- */

/* What is computed.  Supported: heads 1..128, nope_dim (K) 128 or 192,
 * latent_dim (N) 512, rope_dim (R) 64. */
typedef struct spark_mla_qproj_desc {
  size_t struct_size; /* sizeof(spark_mla_qproj_desc) */
  int32_t heads;      /* H */
  int32_t nope_dim;   /* K */
  int32_t latent_dim; /* N */
  int32_t rope_dim;   /* R */
  spark_weight_format weight_format;
  spark_dtype out_dtype;
} spark_mla_qproj_desc;
/* Zero sizes (set heads and the dimensions), bf16 weights, bf16 output. */
#define SPARK_MLA_QPROJ_DESC_INIT \
  {sizeof(spark_mla_qproj_desc), 0, 0, 0, 0, SPARK_WEIGHTS_BF16, SPARK_DTYPE_BF16}

/* The tensors of one call.  Strides are in ELEMENTS of the tensor's own type and
 * the innermost dimension is contiguous (stride 1) for every tensor.
 *
 *   q_nope  bf16  [H, M, K]    element (h, m, k) at q_nope[h*q_nope_stride_h + m*q_nope_stride_m + k]
 *   w       bf16 or e4m3fn [H, K, N]   (h, k, n) at w[h*w_stride_h + k*w_stride_k + n]
 *   w_scale MXFP8: e8m0 [H, K, N/32], scale (h, k, j) at w_scale[h*w_scale_stride_h + k*w_scale_stride_k + j]
 *           FP8_BLOCK128: fp32 [B, N/128], the packed weight's block scales: weight (h, k, n) is
 *           packed row p = h*w_scale_stride_h + k (w_scale_stride_h: the rows per head of the
 *           pack, K + V), and its scale is w_scale[(p / 128)*w_scale_stride_k + n/128]
 *           (w_scale_stride_k: the stride of the scale rows, in floats).  w's first row is
 *           packed row 0: the first row of the scales' first block row.
 *   q_pe    bf16  [M, H, R]    (m, h, r) at q_pe[m*q_pe_stride_m + h*q_pe_stride_h + r]
 *   out     bf16 or e4m3fn [M, H, N+R] (m, h, c) at out[m*out_stride_m + h*out_stride_h + c]
 *   q_scale fp32 scalar, a DEVICE pointer, read at run time (so a captured graph
 *           follows its value); required for e4m3 output, ignored (may be anything,
 *           NULL included) for bf16 output.
 *
 * Rules (checked by spark_mla_qproj_can_implement and every run):
 *   - 1 <= m <= SPARK_MLA_QPROJ_MAX_M (8192), and <= the plan's max_m.
 *   - every pointer non-NULL except w_scale (NULL for bf16 weights) and q_scale (only
 *     read, and so only checked, for e4m3 output).
 *   - every stride > 0.
 *   - 16-byte alignment: the base pointers of q_nope, w, q_pe and out are multiples
 *     of 16 bytes; the outer strides of q_nope, q_pe and bf16 w/out are multiples of
 *     8 elements; e4m3 w strides are multiples of 16 elements; e4m3 out strides are
 *     multiples of 8 elements; w_scale's base and strides are multiples of 4 bytes;
 *     q_scale is 4-byte aligned.
 *   - rows must not overlap inside one tensor: w_stride_k >= N, q_nope_stride_m and
 *     q_nope_stride_h >= K, q_pe strides >= R, out strides >= N+R; MXFP8 w_scale_stride_k >= N/32;
 *     FP8_BLOCK128 w_scale_stride_h >= K and w_scale_stride_k >= N/128;
 *     and out's rows (m, h) are disjoint: with M > 1 and H > 1 the larger of its two
 *     strides (out_stride_m where they are equal) is >= (count of the other dimension - 1)
 *     x the smaller stride + N+R, e.g. out_stride_m >= (H-1) * out_stride_h + N+R.
 *   - out must not overlap any input (the byte ranges the views span are disjoint).
 * Rows >= m and the columns of out past N+R are never written. */
typedef struct spark_mla_qproj_args {
  size_t struct_size; /* sizeof(spark_mla_qproj_args) */
  int32_t m;          /* M, tokens in this call */
  const void* q_nope;
  int64_t q_nope_stride_h, q_nope_stride_m;
  const void* w;
  int64_t w_stride_h, w_stride_k;
  const void* w_scale;
  int64_t w_scale_stride_h, w_scale_stride_k;
  const void* q_pe;
  int64_t q_pe_stride_m, q_pe_stride_h;
  void* out;
  int64_t out_stride_m, out_stride_h;
  const float* q_scale;
} spark_mla_qproj_args;
#define SPARK_MLA_QPROJ_ARGS_INIT \
  {sizeof(spark_mla_qproj_args), 0, NULL, 0, 0, NULL, 0, 0, NULL, 0, 0, NULL, 0, 0, NULL, 0, 0, NULL}

/* Checks desc (and args, when non-NULL) against every rule above, on the host,
 * without a device.  Returns SUCCESS, INVALID_ARGUMENT or UNSUPPORTED with a message
 * naming the argument.  Thread-safe. */
SPARK_API spark_status spark_mla_qproj_can_implement(const spark_mla_qproj_desc* desc,
                                                     const spark_mla_qproj_args* args);

/* The largest M (tokens per call) spark_mla_qproj runs. */
#define SPARK_MLA_QPROJ_MAX_M 8192

typedef struct spark_mla_qproj_plan_options {
  size_t struct_size; /* sizeof(spark_mla_qproj_plan_options) */
  /* The largest M this plan will run, 1..8192. */
  int32_t max_m;
  /* 0 or 1 (anything else is INVALID_ARGUMENT), as is enable_pdl.
   * 0: create prewarms (loads from the cache or compiles) every M-regime up to max_m,
   *    so runs never compile or load.
   * 1: nothing is prewarmed; a run that needs an unloaded kernel loads (or compiles)
   *    it first, or fails with NOT_LOADED_WHILE_CAPTURING on a capturing stream. */
  int32_t lazy;
  /* 1: launch with programmatic dependent launch (sm_90+), so the kernel's prologue
   * overlaps the previous kernel on the stream. */
  int32_t enable_pdl;
} spark_mla_qproj_plan_options;
/* max_m 8192, not lazy, no PDL: what a NULL opts means. */
#define SPARK_MLA_QPROJ_PLAN_OPTIONS_INIT {sizeof(spark_mla_qproj_plan_options), SPARK_MLA_QPROJ_MAX_M, 0, 0}

/* Creates a plan for desc on ctx.  opts may be NULL (max_m 8192, not lazy, no PDL).
 * Errors: INVALID_ARGUMENT, UNSUPPORTED, COMPILE (the NVRTC log is in the message),
 * CACHE, CUDA, JIT_DISABLED.  Thread-safe. */
SPARK_API spark_status spark_mla_qproj_plan_create(spark_context ctx,
                                                   const spark_mla_qproj_desc* desc,
                                                   const spark_mla_qproj_plan_options* opts,
                                                   spark_mla_qproj_plan* out);

/* spark_mla_qproj_plan_destroy(NULL) is a no-op.  Kernels stay loaded in the context. */
SPARK_API void spark_mla_qproj_plan_destroy(spark_mla_qproj_plan plan);

/* Validates args and launches one kernel on stream.  Never compiles, allocates or
 * synchronises (except a lazy plan's first use of a regime on a non-capturing
 * stream), so it can be captured in a CUDA graph and replayed with new contents.
 * Errors: INVALID_ARGUMENT, NOT_LOADED_WHILE_CAPTURING, CUDA.  Thread-safe. */
SPARK_API spark_status spark_mla_qproj_run(spark_mla_qproj_plan plan,
                                           const spark_mla_qproj_args* args,
                                           spark_stream stream);

/* ------------------------------------------------------------------------- */
/* MLA value up-projection (the second half of MLA absorption).               */
/* ------------------------------------------------------------------------- */
/* After attention in latent space, o[M, H, L] -> the input of o_proj:
 *
 *   out[m, h*V + v] = sum_l o[m, h, l] * W_UV[h, l, v]        (FP32 accumulation)
 *
 * where W_UV[h] is the [L, V] view of head h's last V rows of the packed kv_b_proj
 * weight [H*(K+V), L] (L contiguous).  Supported: heads 1..128, latent_dim (L) 512,
 * v_head_dim (V) 128 or 256; bf16, MXFP8 or block-FP8 weights; bf16 or e4m3 output. */
typedef struct spark_mla_oproj_desc {
  size_t struct_size; /* sizeof(spark_mla_oproj_desc) */
  int32_t heads;      /* H */
  int32_t latent_dim; /* L */
  int32_t v_head_dim; /* V */
  spark_weight_format weight_format;
  spark_dtype out_dtype;
} spark_mla_oproj_desc;
/* Zero sizes (set heads and the dimensions), bf16 weights, bf16 output. */
#define SPARK_MLA_OPROJ_DESC_INIT \
  {sizeof(spark_mla_oproj_desc), 0, 0, 0, SPARK_WEIGHTS_BF16, SPARK_DTYPE_BF16}

/* The tensors of one call.  Strides are in ELEMENTS of the tensor's own type and the
 * innermost dimension is contiguous (stride 1) for every tensor.
 *
 *   o       bf16  [M, H, L]    (m, h, l) at o[m*o_stride_m + h*o_stride_h + l]
 *   w       bf16 or e4m3fn: W_UV[h, l, v] at w[h*w_stride_h + v*w_stride_v + l], i.e. the
 *           rows of the packed kv_b_proj: w = pack + K*L (the first V row of head 0),
 *           w_stride_h = (K+V)*L, w_stride_v = L.
 *   w_scale MXFP8: e8m0 [H, V, L/32], the scale of (h, v, l) at
 *           w_scale[h*w_scale_stride_h + v*w_scale_stride_v + l/32] (the packed rows' own
 *           scale bytes: w_scale = pack_scales + K*(L/32), w_scale_stride_h = (K+V)*(L/32)).
 *           FP8_BLOCK128: fp32 [B, L/128], the packed weight's block scales.  W_UV[h] is head
 *           h's last V rows, so weight (h, v, l) lies in packed row
 *           p = (h + 1)*w_scale_stride_h - V + v (w_scale_stride_h: the pack's rows per head,
 *           K + V), and its scale is w_scale[(p / 128)*w_scale_stride_v + l/128]
 *           (w_scale_stride_v: the stride of the scale rows, in floats).  w_scale points at
 *           the scales of the pack's row 0.
 *   out     bf16 or e4m3fn [M, H*V]  (m, h, v) at out[m*out_stride_m + h*V + v]
 *   out_scale fp32 scalar, a DEVICE pointer read at run time; required for e4m3 output
 *           (out = e4m3(RN_bf16(acc) / *out_scale), the query projection's rule), ignored
 *           for bf16 output.
 *
 * Rules (checked by spark_mla_oproj_can_implement and every run):
 *   - 1 <= m <= SPARK_MLA_OPROJ_MAX_M (8192), and <= the plan's max_m.
 *   - every pointer non-NULL except w_scale (NULL for bf16 weights) and out_scale (only
 *     read, and so only checked, for e4m3 output).
 *   - every stride > 0.
 *   - alignment: o, w and out 16-byte aligned; o's strides and bf16 w strides multiples of
 *     8 elements, e4m3 w strides of 16; out_stride_m a multiple of 8 elements; MXFP8
 *     w_scale 4-byte aligned with strides multiples of 4; block-FP8 w_scale 4-byte aligned;
 *     out_scale 4-byte aligned.
 *   - every stride steps past a whole row: o and w strides >= L; MXFP8 w_scale strides
 *     >= L/32; block FP8 w_scale_stride_h >= V and w_scale_stride_v >= L/128; out's rows
 *     are disjoint: out_stride_m >= H*V.  (The inputs are only read, so beyond that their
 *     views may overlap, e.g. o's heads and tokens.)
 *   - out must not overlap any input.
 * Rows >= m and out's columns past H*V are never written. */
typedef struct spark_mla_oproj_args {
  size_t struct_size; /* sizeof(spark_mla_oproj_args) */
  int32_t m;          /* M, tokens in this call */
  const void* o;
  int64_t o_stride_m, o_stride_h;
  const void* w;
  int64_t w_stride_h, w_stride_v;
  const void* w_scale;
  int64_t w_scale_stride_h, w_scale_stride_v;
  void* out;
  int64_t out_stride_m;
  const float* out_scale;
} spark_mla_oproj_args;
#define SPARK_MLA_OPROJ_ARGS_INIT \
  {sizeof(spark_mla_oproj_args), 0, NULL, 0, 0, NULL, 0, 0, NULL, 0, 0, NULL, 0, NULL}

/* The largest M (tokens per call) spark_mla_oproj runs. */
#define SPARK_MLA_OPROJ_MAX_M 8192

typedef struct spark_mla_oproj_plan_s* spark_mla_oproj_plan;

/* Checks desc (and args, when non-NULL) against every rule above, on the host, without a
 * device.  Returns SUCCESS, INVALID_ARGUMENT or UNSUPPORTED with a message naming the
 * argument.  Thread-safe. */
SPARK_API spark_status spark_mla_oproj_can_implement(const spark_mla_oproj_desc* desc,
                                                     const spark_mla_oproj_args* args);
/* As spark_mla_qproj_plan_create, with the same options struct (max_m, lazy, enable_pdl). */
SPARK_API spark_status spark_mla_oproj_plan_create(spark_context ctx,
                                                   const spark_mla_oproj_desc* desc,
                                                   const spark_mla_qproj_plan_options* opts,
                                                   spark_mla_oproj_plan* out);
/* spark_mla_oproj_plan_destroy(NULL) is a no-op.  Kernels stay loaded in the context. */
SPARK_API void spark_mla_oproj_plan_destroy(spark_mla_oproj_plan plan);
/* As spark_mla_qproj_run: validates args and launches one kernel on stream. */
SPARK_API spark_status spark_mla_oproj_run(spark_mla_oproj_plan plan,
                                           const spark_mla_oproj_args* args,
                                           spark_stream stream);

#ifdef __cplusplus
}
#endif

#endif /* SPARK_SPARK_H_ */

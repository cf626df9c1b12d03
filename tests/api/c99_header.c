/* The public header compiles as strict C99 (-std=c99 -pedantic-errors -Wall -Wextra
 * -Werror), links against libspark and answers the host-only calls without a GPU.
 * Exit 0 when every check holds, 1 otherwise. */
#include "spark/spark.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;

#define EXPECT(cond)                                                  \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "c99_header.c:%d: check failed: %s\n", __LINE__, #cond); \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

/* Every function of the API, taken by address: the declarations are usable from C. */
typedef struct api_table {
  unsigned (*version_number)(void);
  const char* (*version_string)(void);
  const char* (*status_string)(spark_status);
  const char* (*last_error)(void);
  spark_status (*context_create)(const spark_context_options*, spark_context*);
  void (*context_destroy)(spark_context);
  spark_status (*context_compute_capability)(spark_context, int32_t*);
  spark_status (*can_implement)(const spark_mla_qproj_desc*, const spark_mla_qproj_args*);
  spark_status (*plan_create)(spark_context, const spark_mla_qproj_desc*,
                              const spark_mla_qproj_plan_options*, spark_mla_qproj_plan*);
  void (*plan_destroy)(spark_mla_qproj_plan);
  spark_status (*run)(spark_mla_qproj_plan, const spark_mla_qproj_args*, spark_stream);
  spark_status (*set_log_callback)(spark_log_callback, void*);
  spark_status (*set_log_level)(spark_log_level);
} api_table;

/* A log callback as a C host writes one: counts the messages it is given. */
static void count_messages(spark_log_level level, const char* message, void* user_data) {
  (void)level;
  if (message != NULL) ++*(int*)user_data;
}

static const char* safe(const char* s) { return s ? s : "(null)"; }

int main(void) {
  /* Every status, weight format and dtype, with their pinned values. */
  const spark_status statuses[] = {
      SPARK_SUCCESS,          SPARK_ERROR_INVALID_ARGUMENT,
      SPARK_ERROR_UNSUPPORTED, SPARK_ERROR_NO_DEVICE,
      SPARK_ERROR_CUDA,       SPARK_ERROR_COMPILE,
      SPARK_ERROR_CACHE,      SPARK_ERROR_NOT_LOADED_WHILE_CAPTURING,
      SPARK_ERROR_JIT_DISABLED, SPARK_ERROR_OUT_OF_MEMORY,
      SPARK_ERROR_INTERNAL};
  const spark_weight_format formats[] = {SPARK_WEIGHTS_BF16, SPARK_WEIGHTS_MXFP8};
  const spark_dtype dtypes[] = {SPARK_DTYPE_BF16, SPARK_DTYPE_E4M3};
  const spark_log_level levels[] = {SPARK_LOG_TRACE, SPARK_LOG_DEBUG,    SPARK_LOG_INFO, SPARK_LOG_WARN,
                                    SPARK_LOG_ERROR, SPARK_LOG_CRITICAL, SPARK_LOG_OFF};
  int messages = 0;
  size_t i;

  api_table api;
  spark_context ctx = NULL;
  spark_mla_qproj_plan plan = NULL;
  spark_stream stream = NULL;
  spark_context_options ctx_opts;
  spark_mla_qproj_plan_options plan_opts;
  spark_mla_qproj_desc desc;
  spark_mla_qproj_args args;
  spark_status st;
  const char* version;

  for (i = 0; i < sizeof statuses / sizeof statuses[0]; ++i) {
    EXPECT((int)statuses[i] == (int)i);
    EXPECT(spark_status_string(statuses[i]) != NULL);
    printf("status %d: %s\n", (int)statuses[i], safe(spark_status_string(statuses[i])));
  }
  EXPECT(spark_status_string((spark_status)99) != NULL);
  for (i = 0; i < sizeof formats / sizeof formats[0]; ++i) EXPECT((int)formats[i] == (int)i);
  for (i = 0; i < sizeof dtypes / sizeof dtypes[0]; ++i) EXPECT((int)dtypes[i] == (int)i);
  for (i = 0; i < sizeof levels / sizeof levels[0]; ++i) EXPECT((int)levels[i] == (int)i);

  api.version_number = spark_version_number;
  api.version_string = spark_version_string;
  api.status_string = spark_status_string;
  api.last_error = spark_last_error;
  api.context_create = spark_context_create;
  api.context_destroy = spark_context_destroy;
  api.context_compute_capability = spark_context_compute_capability;
  api.can_implement = spark_mla_qproj_can_implement;
  api.plan_create = spark_mla_qproj_plan_create;
  api.plan_destroy = spark_mla_qproj_plan_destroy;
  api.run = spark_mla_qproj_run;
  api.set_log_callback = spark_set_log_callback;
  api.set_log_level = spark_set_log_level;
  EXPECT(api.version_number != NULL && api.version_string != NULL && api.status_string != NULL &&
         api.last_error != NULL && api.context_create != NULL && api.context_destroy != NULL &&
         api.context_compute_capability != NULL && api.can_implement != NULL &&
         api.plan_create != NULL && api.plan_destroy != NULL && api.run != NULL &&
         api.set_log_callback != NULL && api.set_log_level != NULL);

  /* Version. */
  version = spark_version_string();
  EXPECT(version != NULL);
  printf("spark %s (header %d.%d.%d, SPARK_VERSION_NUMBER %d, library %u)\n", safe(version),
         SPARK_VERSION_MAJOR, SPARK_VERSION_MINOR, SPARK_VERSION_PATCH, SPARK_VERSION_NUMBER,
         spark_version_number());
  EXPECT(SPARK_VERSION_NUMBER == spark_version_number());

  /* The initializer macros compile under -Wall -Wextra -Werror and set struct_size. */
  {
    const spark_context_options c0 = SPARK_CONTEXT_OPTIONS_INIT;
    const spark_cache_stats s0 = SPARK_CACHE_STATS_INIT;
    const spark_mla_qproj_desc d0 = SPARK_MLA_QPROJ_DESC_INIT;
    const spark_mla_qproj_args a0 = SPARK_MLA_QPROJ_ARGS_INIT;
    const spark_mla_qproj_plan_options p0 = SPARK_MLA_QPROJ_PLAN_OPTIONS_INIT;
    EXPECT(c0.struct_size == sizeof c0 && c0.device == 0);
    EXPECT(s0.struct_size == sizeof s0 && s0.hits == 0 && s0.load_ms == 0.0);
    EXPECT(d0.struct_size == sizeof d0 && d0.heads == 0 && d0.weight_format == SPARK_WEIGHTS_BF16 &&
           d0.out_dtype == SPARK_DTYPE_BF16);
    EXPECT(a0.struct_size == sizeof a0 && a0.m == 0 && a0.q_nope == NULL && a0.out_stride_h == 0 &&
           a0.q_scale == NULL);
    EXPECT(p0.struct_size == sizeof p0 && p0.max_m == 8192 && p0.lazy == 0 && p0.enable_pdl == 0);
  }
  {
    /* The value up-projection's structs and entry points, from C. */
    spark_mla_oproj_desc od = SPARK_MLA_OPROJ_DESC_INIT;
    const spark_mla_oproj_args oa = SPARK_MLA_OPROJ_ARGS_INIT;
    spark_mla_oproj_plan oplan = NULL;
    EXPECT(od.struct_size == sizeof od && od.heads == 0 && od.weight_format == SPARK_WEIGHTS_BF16);
    EXPECT(oa.struct_size == sizeof oa && oa.m == 0 && oa.o == NULL && oa.out_scale == NULL);
    od.heads = 16;
    od.latent_dim = 512;
    od.v_head_dim = 128;
    st = spark_mla_oproj_can_implement(&od, NULL);
    EXPECT(st == SPARK_SUCCESS);
    od.v_head_dim = 96;
    st = spark_mla_oproj_can_implement(&od, NULL);
    EXPECT(st == SPARK_ERROR_UNSUPPORTED && strstr(spark_last_error(), "v_head_dim") != NULL);
    st = spark_mla_oproj_plan_create(NULL, &od, NULL, &oplan);
    EXPECT(st == SPARK_ERROR_INVALID_ARGUMENT && oplan == NULL);
    EXPECT(spark_mla_oproj_run(NULL, &oa, NULL) == SPARK_ERROR_INVALID_ARGUMENT);
    spark_mla_oproj_plan_destroy(NULL);
  }

  /* Options structs (not used to create anything here). */
  memset(&ctx_opts, 0, sizeof ctx_opts);
  ctx_opts.struct_size = sizeof ctx_opts;
  ctx_opts.device = 0;
  memset(&plan_opts, 0, sizeof plan_opts);
  plan_opts.struct_size = sizeof plan_opts;
  plan_opts.max_m = 256;
  plan_opts.lazy = 0;
  plan_opts.enable_pdl = 1;
  printf("sizeof: context_options %lu, plan_options %lu, desc %lu, args %lu\n",
         (unsigned long)ctx_opts.struct_size, (unsigned long)plan_opts.struct_size,
         (unsigned long)sizeof desc, (unsigned long)sizeof args);

  /* A valid descriptor: GLM-5 at TP 4. */
  memset(&desc, 0, sizeof desc);
  desc.struct_size = sizeof desc;
  desc.heads = 16;
  desc.nope_dim = 192;
  desc.latent_dim = 512;
  desc.rope_dim = 64;
  desc.weight_format = SPARK_WEIGHTS_BF16;
  desc.out_dtype = SPARK_DTYPE_BF16;
  st = spark_mla_qproj_can_implement(&desc, NULL);
  printf("can_implement(valid desc, NULL) = %d (%s)\n", (int)st, safe(spark_status_string(st)));
  EXPECT(st == SPARK_SUCCESS);

  /* Valid args with fake, aligned device addresses (never dereferenced). */
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.m = 64;
  args.q_nope = (const void*)(uintptr_t)0x7f0000000000ull;
  args.q_nope_stride_h = 256;
  args.q_nope_stride_m = 16 * 256;
  args.w = (const void*)(uintptr_t)0x7f1000000000ull;
  args.w_stride_h = 448 * 512;
  args.w_stride_k = 512;
  args.w_scale = NULL;
  args.w_scale_stride_h = 0;
  args.w_scale_stride_k = 0;
  args.q_pe = (const void*)(uintptr_t)(0x7f0000000000ull + 2 * 192);
  args.q_pe_stride_m = 16 * 256;
  args.q_pe_stride_h = 256;
  args.out = (void*)(uintptr_t)0x7f3000000000ull;
  args.out_stride_m = 16 * 584;
  args.out_stride_h = 584;
  args.q_scale = NULL;
  st = spark_mla_qproj_can_implement(&desc, &args);
  printf("can_implement(valid desc, valid args) = %d (%s)\n", (int)st, safe(spark_status_string(st)));
  EXPECT(st == SPARK_SUCCESS);

  /* heads = 0 is unsupported. */
  desc.heads = 0;
  st = spark_mla_qproj_can_implement(&desc, NULL);
  printf("can_implement(heads = 0) = %d (%s): %s\n", (int)st, safe(spark_status_string(st)),
         safe(spark_last_error()));
  EXPECT(st == SPARK_ERROR_UNSUPPORTED);
  EXPECT(spark_last_error() != NULL && strstr(spark_last_error(), "heads") != NULL);
  desc.heads = 16;

  /* A plan needs a context: a NULL one is an argument error, nothing is touched. */
  st = spark_mla_qproj_plan_create(ctx, &desc, &plan_opts, &plan);
  printf("plan_create(NULL ctx) = %d (%s): %s\n", (int)st, safe(spark_status_string(st)),
         safe(spark_last_error()));
  EXPECT(st == SPARK_ERROR_INVALID_ARGUMENT);
  st = spark_mla_qproj_run(plan, &args, stream);
  EXPECT(st == SPARK_ERROR_INVALID_ARGUMENT);

  /* Logging: a callback and a level set from C; an out-of-range level is refused, naming it. */
  EXPECT(spark_set_log_callback(count_messages, &messages) == SPARK_SUCCESS);
  EXPECT(spark_set_log_level(SPARK_LOG_INFO) == SPARK_SUCCESS);
  st = spark_set_log_level((spark_log_level)7);
  printf("set_log_level(7) = %d (%s): %s\n", (int)st, safe(spark_status_string(st)), safe(spark_last_error()));
  EXPECT(st == SPARK_ERROR_INVALID_ARGUMENT);
  EXPECT(spark_last_error() != NULL && strstr(spark_last_error(), "level") != NULL);
  EXPECT(spark_set_log_callback(NULL, NULL) == SPARK_SUCCESS);
  EXPECT(spark_set_log_level(SPARK_LOG_WARN) == SPARK_SUCCESS);

  /* Destroying NULL handles is a no-op. */
  spark_mla_qproj_plan_destroy(NULL);
  spark_context_destroy(NULL);
  spark_context_destroy(ctx);

  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("c99 header: all checks passed\n");
  return 0;
}

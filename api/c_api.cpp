// The C boundary: every entry point catches everything and returns a status; the
// message is kept per thread.  The only file that sees both the public header and the
// internals' types as handles.
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "runtime/context.h"
#include "ops/mla_qproj/plan.h"
#include "ops/mla_qproj/validate.h"
#include "spark/spark.h"

struct spark_context_s {
  std::unique_ptr<spark::Context> impl;
};

struct spark_mla_qproj_plan_s {
  std::unique_ptr<spark::Plan> impl;
};

namespace {

thread_local std::string t_last_error;

template <class Fn>
spark_status guarded(Fn&& fn) noexcept {
  try {
    fn();
    t_last_error.clear();
    return SPARK_SUCCESS;
  } catch (const spark::Error& e) {
    t_last_error = e.what();
    spark::log().debug("{} ({})", e.what(), e.where());
    return e.status();
  } catch (const std::bad_alloc&) {
    t_last_error = "out of host memory";
    return SPARK_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    t_last_error = std::string("internal error: ") + e.what();
    return SPARK_ERROR_INTERNAL;
  } catch (...) {
    t_last_error = "internal error: unknown exception";
    return SPARK_ERROR_INTERNAL;
  }
}

}  // namespace

extern "C" {

unsigned spark_version_number(void) { return SPARK_VERSION_NUMBER; }

const char* spark_version_string(void) {
#define SPARK_STR2(x) #x
#define SPARK_STR(x) SPARK_STR2(x)
  return SPARK_STR(SPARK_VERSION_MAJOR) "." SPARK_STR(SPARK_VERSION_MINOR) "." SPARK_STR(SPARK_VERSION_PATCH);
}

const char* spark_status_string(spark_status status) {
  // Read as the int the caller passed: any int may arrive through the C enum.
  switch (spark::enum_value(status)) {
    case SPARK_SUCCESS: return "success";
    case SPARK_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case SPARK_ERROR_UNSUPPORTED: return "unsupported";
    case SPARK_ERROR_NO_DEVICE: return "no CUDA device or driver";
    case SPARK_ERROR_CUDA: return "CUDA driver error";
    case SPARK_ERROR_COMPILE: return "kernel compilation failed";
    case SPARK_ERROR_CACHE: return "kernel cache error";
    case SPARK_ERROR_NOT_LOADED_WHILE_CAPTURING: return "kernel not loaded while the stream is capturing";
    case SPARK_ERROR_JIT_DISABLED: return "kernel not cached and SPARK_JIT=0";
    case SPARK_ERROR_OUT_OF_MEMORY: return "out of memory";
    case SPARK_ERROR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

const char* spark_last_error(void) { return t_last_error.c_str(); }

spark_status spark_set_log_callback(spark_log_callback callback, void* user_data) {
  return guarded([&] { spark::set_log_callback(callback, user_data); });
}

spark_status spark_set_log_level(spark_log_level level) {
  return guarded([&] {
    const int32_t v = spark::enum_value(level);
    SPARK_CHECK_ARG(v >= SPARK_LOG_TRACE && v <= SPARK_LOG_OFF, "level",
                    "{} is outside SPARK_LOG_TRACE ({})..SPARK_LOG_OFF ({})", v, int{SPARK_LOG_TRACE},
                    int{SPARK_LOG_OFF});
    spark::log().set_level(static_cast<spdlog::level::level_enum>(v));
  });
}

spark_status spark_context_create(const spark_context_options* opts, spark_context* out) {
  return guarded([&] {
    SPARK_CHECK_ARG(out != nullptr, "out", "must not be NULL");
    *out = nullptr;
    int device = 0;
    if (opts) {
      SPARK_CHECK_ARG(opts->struct_size >= sizeof(spark_context_options), "struct_size",
                      "opts->struct_size is {}, expected sizeof(spark_context_options) = {}", opts->struct_size,
                      sizeof(spark_context_options));
      SPARK_CHECK_ARG(opts->device >= 0, "device", "must be >= 0 (got {})", opts->device);
      device = opts->device;
    }
    auto ctx = std::make_unique<spark_context_s>();
    ctx->impl = std::make_unique<spark::Context>(device);
    *out = ctx.release();
  });
}

void spark_context_destroy(spark_context ctx) {
  try {
    delete ctx;
  } catch (...) {
  }
}

spark_status spark_context_compute_capability(spark_context ctx, int32_t* out) {
  return guarded([&] {
    SPARK_CHECK_ARG(ctx != nullptr, "ctx", "must not be NULL");
    SPARK_CHECK_ARG(out != nullptr, "out", "must not be NULL");
    *out = ctx->impl->compute_capability();
  });
}

spark_status spark_mla_qproj_can_implement(const spark_mla_qproj_desc* desc, const spark_mla_qproj_args* args) {
  return guarded([&] {
    spark::validate_desc(desc);
    if (args) spark::validate_args(*desc, args, spark::kMaxM);
  });
}

spark_status spark_mla_qproj_plan_create(spark_context ctx, const spark_mla_qproj_desc* desc,
                                         const spark_mla_qproj_plan_options* opts, spark_mla_qproj_plan* out) {
  return guarded([&] {
    SPARK_CHECK_ARG(ctx != nullptr, "ctx", "must not be NULL");
    SPARK_CHECK_ARG(out != nullptr, "out", "must not be NULL");
    *out = nullptr;
    spark::validate_desc(desc);
    spark_mla_qproj_plan_options o{sizeof(spark_mla_qproj_plan_options), spark::kMaxM, 0, 0};
    if (opts) {
      SPARK_CHECK_ARG(opts->struct_size >= sizeof(spark_mla_qproj_plan_options), "struct_size",
                      "opts->struct_size is {}, expected sizeof(spark_mla_qproj_plan_options) = {}",
                      opts->struct_size, sizeof(spark_mla_qproj_plan_options));
      SPARK_CHECK_ARG(opts->max_m >= 1 && opts->max_m <= spark::kMaxM, "max_m", "{} is outside 1..{}",
                      opts->max_m, spark::kMaxM);
      SPARK_CHECK_ARG(opts->lazy == 0 || opts->lazy == 1, "lazy", "must be 0 or 1 (got {})", opts->lazy);
      SPARK_CHECK_ARG(opts->enable_pdl == 0 || opts->enable_pdl == 1, "enable_pdl", "must be 0 or 1 (got {})",
                      opts->enable_pdl);
      o = *opts;
      o.struct_size = sizeof(spark_mla_qproj_plan_options);
    }
    auto plan = std::make_unique<spark_mla_qproj_plan_s>();
    plan->impl = std::make_unique<spark::Plan>(*ctx->impl, *desc, o);
    *out = plan.release();
  });
}

void spark_mla_qproj_plan_destroy(spark_mla_qproj_plan plan) {
  try {
    delete plan;
  } catch (...) {
  }
}

spark_status spark_mla_qproj_run(spark_mla_qproj_plan plan, const spark_mla_qproj_args* args,
                                 spark_stream stream) {
  return guarded([&] {
    SPARK_CHECK_ARG(plan != nullptr, "plan", "must not be NULL");
    plan->impl->run(args, reinterpret_cast<CUstream>(stream));
  });
}

}  // extern "C"

extern "C" spark_status spark_context_cache_stats(spark_context ctx, spark_cache_stats* out) {
  return guarded([&] {
    // out is checked first so that every rule can be exercised without a device.
    SPARK_CHECK_ARG(out != nullptr, "out", "must not be NULL");
    SPARK_CHECK_ARG(out->struct_size >= sizeof(spark_cache_stats), "struct_size",
                    "out->struct_size is {}, expected sizeof(spark_cache_stats) = {}", out->struct_size,
                    sizeof(spark_cache_stats));
    SPARK_CHECK_ARG(ctx != nullptr, "ctx", "must not be NULL");
    const spark::CacheCounters c = ctx->impl->store().metrics().snapshot();
    out->struct_size = sizeof(spark_cache_stats);
    out->hits = c.hits;
    out->misses = c.misses;
    out->compiles = c.compiles;
    out->corrupt_entries = c.corrupt_entries;
    out->compile_ms = c.compile_ms;
    out->load_ms = c.load_ms;
  });
}

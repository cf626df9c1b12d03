// The C API's op-independent entry points: version, status strings, logging, contexts and
// their cache counters.  Each op's entry points are in a file of their own (api/mla_qproj.cpp).
#include <memory>
#include <string>

#include "api/c_boundary.h"
#include "core/c_enum.h"

namespace spark {

std::string& thread_last_error() {
  thread_local std::string message;
  return message;
}

}  // namespace spark

using spark::guarded;

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

const char* spark_last_error(void) { return spark::thread_last_error().c_str(); }

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

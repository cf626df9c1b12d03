// The C boundary: every entry point catches everything and returns a status; the message is
// kept per thread.  The files of api/ are the only ones that see both the public header and
// the internals' types as handles.
#pragma once

#include <exception>
#include <memory>
#include <new>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "runtime/context.h"
#include "spark/spark.h"

struct spark_context_s {
  std::unique_ptr<spark::Context> impl;
};

namespace spark {

// The message spark_last_error() returns on this thread.
std::string& thread_last_error();

template <class Fn>
spark_status guarded(Fn&& fn) noexcept {
  try {
    fn();
    spark::thread_last_error().clear();
    return SPARK_SUCCESS;
  } catch (const spark::Error& e) {
    spark::thread_last_error() = e.what();
    spark::log().debug("{} ({})", e.what(), e.where());
    return e.status();
  } catch (const std::bad_alloc&) {
    spark::thread_last_error() = "out of host memory";
    return SPARK_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    spark::thread_last_error() = std::string("internal error: ") + e.what();
    return SPARK_ERROR_INTERNAL;
  } catch (...) {
    spark::thread_last_error() = "internal error: unknown exception";
    return SPARK_ERROR_INTERNAL;
  }
}

// A plan's options as given (each field checked, naming it), or the defaults for NULL:
// every M up to max_m, prewarmed, no PDL.  Both ops' plans take this struct.
inline spark_mla_qproj_plan_options plan_options_or_default(const spark_mla_qproj_plan_options* opts, int max_m) {
  spark_mla_qproj_plan_options o{sizeof(spark_mla_qproj_plan_options), max_m, 0, 0};
  if (!opts) return o;
  SPARK_CHECK_ARG(opts->struct_size >= sizeof(spark_mla_qproj_plan_options), "struct_size",
                  "opts->struct_size is {}, expected sizeof(spark_mla_qproj_plan_options) = {}", opts->struct_size,
                  sizeof(spark_mla_qproj_plan_options));
  SPARK_CHECK_ARG(opts->max_m >= 1 && opts->max_m <= max_m, "max_m", "{} is outside 1..{}", opts->max_m, max_m);
  SPARK_CHECK_ARG(opts->lazy == 0 || opts->lazy == 1, "lazy", "must be 0 or 1 (got {})", opts->lazy);
  SPARK_CHECK_ARG(opts->enable_pdl == 0 || opts->enable_pdl == 1, "enable_pdl", "must be 0 or 1 (got {})",
                  opts->enable_pdl);
  o = *opts;
  o.struct_size = sizeof(spark_mla_qproj_plan_options);
  return o;
}

}  // namespace spark

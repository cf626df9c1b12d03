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

}  // namespace spark

// The one error type inside spark: a public status, a message, and where it was raised.
// Thrown by the SPARK_CHECK macros; converted to a status at the C boundary.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "spark/spark.h"

namespace spark {

class Error : public std::runtime_error {
 public:
  Error(spark_status status, std::string message, const char* file = nullptr, int line = 0);
  spark_status status() const noexcept { return status_; }
  const char* where() const noexcept { return where_.c_str(); }

 private:
  spark_status status_;
  std::string where_;
};

[[noreturn]] void throw_error(spark_status status, std::string message, const char* file, int line);

}  // namespace spark

// SPARK_FAIL(status, "fmt", args...) throws spark::Error.
#define SPARK_FAIL(status, ...) ::spark::throw_error((status), fmt::format(__VA_ARGS__), __FILE__, __LINE__)

// SPARK_CHECK(cond, status, "fmt", args...) throws when cond is false.
#define SPARK_CHECK(cond, status, ...)  \
  do {                                  \
    if (!(cond)) SPARK_FAIL(status, __VA_ARGS__); \
  } while (0)

// An argument rule: the message always starts with the argument's name.
#define SPARK_CHECK_ARG(cond, name, ...)                                                   \
  do {                                                                                     \
    if (!(cond))                                                                           \
      ::spark::throw_error(SPARK_ERROR_INVALID_ARGUMENT,                                   \
                           std::string("argument '") + (name) + "': " + fmt::format(__VA_ARGS__), \
                           __FILE__, __LINE__);                                            \
  } while (0)

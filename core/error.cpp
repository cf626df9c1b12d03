#include "core/error.h"

namespace spark {

Error::Error(spark_status status, std::string message, const char* file, int line)
    : std::runtime_error(std::move(message)), status_(status) {
  if (file) where_ = fmt::format("{}:{}", file, line);
}

void throw_error(spark_status status, std::string message, const char* file, int line) {
  throw Error(status, std::move(message), file, line);
}

}  // namespace spark

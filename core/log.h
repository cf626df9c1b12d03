// spark's one named logger ("spark").  Never spdlog's default logger: the host owns it.
// The level comes from SPARK_LOG_LEVEL (trace, debug, info, warn, error, critical, off);
// the default is warn.
#pragma once

#include <memory>

#include <spdlog/logger.h>

namespace spark {

spdlog::logger& log();

}  // namespace spark

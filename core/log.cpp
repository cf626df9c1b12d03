#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "core/env.h"

namespace spark {

spdlog::logger& log() {
  static const std::shared_ptr<spdlog::logger> logger = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto l = std::make_shared<spdlog::logger>("spark", sink);
    l->set_pattern("[spark] [%l] %v");
    const std::string level = env_string("SPARK_LOG_LEVEL").value_or("warn");
    const spdlog::level::level_enum parsed = spdlog::level::from_str(level);
    // from_str answers "off" for any name it does not know: a typo must not silence the log.
    if (parsed == spdlog::level::off && level != "off") {
      l->set_level(spdlog::level::warn);
      l->warn("SPARK_LOG_LEVEL '{}' is not one of trace, debug, info, warn, error, critical, off; using warn",
              level);
    } else {
      l->set_level(parsed);
    }
    return l;
  }();
  return *logger;
}

}  // namespace spark

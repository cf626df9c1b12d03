#include "core/log.h"

#include <mutex>
#include <string>

#include <spdlog/sinks/sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "core/env.h"
#include "core/error.h"

namespace spark {

namespace {

// The public levels are spdlog's, value for value, so a level crosses the C boundary as is.
constexpr bool same_level(spark_log_level a, spdlog::level::level_enum b) {
  return static_cast<int>(a) == static_cast<int>(b);
}
static_assert(same_level(SPARK_LOG_TRACE, spdlog::level::trace) && same_level(SPARK_LOG_DEBUG, spdlog::level::debug) &&
                  same_level(SPARK_LOG_INFO, spdlog::level::info) && same_level(SPARK_LOG_WARN, spdlog::level::warn) &&
                  same_level(SPARK_LOG_ERROR, spdlog::level::err) &&
                  same_level(SPARK_LOG_CRITICAL, spdlog::level::critical) && same_level(SPARK_LOG_OFF, spdlog::level::off),
              "spark_log_level mirrors spdlog::level::level_enum");

// Set while this thread runs the host's callback.  A line logged from there (the callback
// calling into spark) would wait for the lock its own caller holds: it is dropped instead.
thread_local bool t_in_callback = false;

// The logger's only sink.  One lock serialises every line, so the host's callback is never
// called on two threads at once, and a swap of the callback waits for the line in progress.
class HostSink final : public spdlog::sinks::sink {
 public:
  HostSink() : stderr_(std::make_unique<spdlog::sinks::stderr_sink_st>()) {
    stderr_->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [spark %P] [%l] %v");
  }

  void log(const spdlog::details::log_msg& msg) override {
    if (t_in_callback) return;
    std::lock_guard<std::mutex> g(mu_);
    if (!callback_) {
      stderr_->log(msg);
      return;
    }
    text_.assign(msg.payload.data(), msg.payload.size());
    while (!text_.empty() && (text_.back() == '\n' || text_.back() == '\r')) text_.pop_back();
    // Cleared however the callback returns: spdlog catches what a C++ callback throws.
    struct InCallback {
      InCallback() { t_in_callback = true; }
      ~InCallback() { t_in_callback = false; }
    } in_callback;
    callback_(static_cast<spark_log_level>(msg.level), text_.c_str(), user_data_);
  }

  void flush() override {
    std::lock_guard<std::mutex> g(mu_);
    if (!callback_) stderr_->flush();
  }
  void set_pattern(const std::string& pattern) override {
    std::lock_guard<std::mutex> g(mu_);
    stderr_->set_pattern(pattern);
  }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    std::lock_guard<std::mutex> g(mu_);
    stderr_->set_formatter(std::move(formatter));
  }

  void set_callback(spark_log_callback callback, void* user_data) {
    SPARK_CHECK(!t_in_callback, SPARK_ERROR_INVALID_ARGUMENT,
                "spark_set_log_callback was called from inside the log callback, which must not call spark");
    std::lock_guard<std::mutex> g(mu_);
    callback_ = callback;
    user_data_ = user_data;
  }

 private:
  std::mutex mu_;
  std::unique_ptr<spdlog::sinks::stderr_sink_st> stderr_;
  spark_log_callback callback_ = nullptr;
  void* user_data_ = nullptr;
  std::string text_;  // the line handed to the callback, NUL-terminated
};

// Apart from the logger, so that a callback set before spark's first line also gets the
// lines the logger gives as it starts (an unknown SPARK_LOG_LEVEL).
const std::shared_ptr<HostSink>& host_sink() {
  static const std::shared_ptr<HostSink> sink = std::make_shared<HostSink>();
  return sink;
}

}  // namespace

spdlog::logger& log() {
  static const std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>("spark", host_sink());
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

void set_log_callback(spark_log_callback callback, void* user_data) {
  host_sink()->set_callback(callback, user_data);
  log();  // its first lines go to the callback just set
}

}  // namespace spark

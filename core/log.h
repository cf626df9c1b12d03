// spark's one named logger ("spark").  Never spdlog's default logger: the host owns it.
// Its lines go to the host's callback (spark_set_log_callback) when one is set, else to
// stderr as "[2026-12-04 07:40:00.123] [spark 12345] [warning] text": several ranks often
// share one terminal, and the time and pid tell their lines apart.
// The level comes from SPARK_LOG_LEVEL (trace, debug, info, warn, error, critical, off),
// default warn, until spark_set_log_level overrides it.
#pragma once

#include <memory>

#include <spdlog/logger.h>

#include "spark/spark.h"

namespace spark {

spdlog::logger& log();

// Sends every line to callback from now on (nullptr: back to stderr).  Returns once no
// call of the previous callback is in progress, so the host may free its user_data.
// Throws INVALID_ARGUMENT when called from inside the callback, which would wait for
// itself.
void set_log_callback(spark_log_callback callback, void* user_data);

}  // namespace spark

// Environment variables spark reads (SPEC §6).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace spark {

// The value of an environment variable, or nullopt when unset or empty.
std::optional<std::string> env_string(const char* name);

// The cache root: $SPARK_CACHE_DIR, else $XDG_CACHE_HOME/spark, else ~/.cache/spark.
std::filesystem::path default_cache_dir();

// SPARK_JIT=0 forbids compiling: only cached kernels are used.
bool jit_enabled();

// SPARK_DUMP_DIR: where every compile's source, PTX and log are kept, if set.
std::optional<std::filesystem::path> dump_dir();

}  // namespace spark

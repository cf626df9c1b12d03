// Environment variables spark reads (SPEC §6).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace spark {

// The value of an environment variable, or nullopt when unset or empty.
std::optional<std::string> env_string(const char* name);

// The cache root: $SPARK_CACHE_DIR, else $XDG_CACHE_HOME/spark, else ~/.cache/spark.
std::filesystem::path default_cache_dir();

// SPARK_JIT=0 forbids compiling: only cached kernels are used.
bool jit_enabled();

// "1048576", "512K", "64M", "2G", "1T" (powers of 1024; "KiB"/"KB" spellings too)
// -> bytes; nullopt when the text is not such a size.
std::optional<uint64_t> parse_byte_size(std::string_view text);

// SPARK_CACHE_MAX_BYTES: the cache's size cap, if set.  A value that is not a size is
// logged (once) and ignored: a cache policy must not fail kernel loads.
std::optional<uint64_t> cache_max_bytes();

// SPARK_DUMP_DIR: where every compile's source, PTX and log are kept, if set.
std::optional<std::filesystem::path> dump_dir();

}  // namespace spark

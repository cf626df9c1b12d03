// Environment variables spark reads (docs/environment.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace spark {

// The value of an environment variable, or nullopt when unset or empty.
std::optional<std::string> env_string(const char* name);

// The cache root: $SPARK_CACHE_DIR, else $XDG_CACHE_HOME/spark, else ~/.cache/spark
// ($HOME, else the passwd entry, else /tmp).  Always absolute: a relative value is taken
// against the working directory the process had when libspark was loaded, so a later
// chdir does not move the cache.
std::filesystem::path default_cache_dir();

// SPARK_JIT, in any case: 0, false, off or no forbid compiling (only cached kernels are
// used); 1, true, on or yes (or unset) allow it.  Anything else is logged (once) and leaves
// JIT enabled.
bool jit_enabled();

// Decimal digits and an optional unit, in any case: B, or K, M, G, T (powers of 1024) alone
// or followed by B or iB: "1048576", "512K", "64MiB", "2G", "1TB" -> bytes; nullopt when the
// text is not such a size or the size does not fit 64 bits.  "0" is a size (0 bytes).
std::optional<uint64_t> parse_byte_size(std::string_view text);

// SPARK_CACHE_MAX_BYTES: the cache's size cap, if set.  A value that is not a size, or is
// 0 (which would evict every kernel as soon as it is built), is logged (once) and ignored:
// no cap.  A cache policy must not fail kernel loads.
std::optional<uint64_t> cache_max_bytes();

// SPARK_DUMP_DIR: where every compile's source, PTX and log are kept, if set.
std::optional<std::filesystem::path> dump_dir();

}  // namespace spark

// The archive reader behind `spark-cache import`: any bytes, read and checked exactly as an
// import reads a file (libarchive's zstd and tar readers, member by member, each file within
// its cap from its header, each entry against its manifest, the checksum list), writing
// nothing.  It must never crash, read out of bounds or allocate more
// than a cap allows; every refusal is a spark::Error naming 'FILE'.  An accepted archive's
// entries all have names a cache entry may have, each once.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "cache/archive.h"
#include "cache/cache_id.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const std::vector<std::string> names = spark::verify_archive_bytes(bytes);
    std::set<std::string> seen;
    for (const std::string& n : names)
      if (!spark::is_entry_name(n) || !seen.insert(n).second) __builtin_trap();
  } catch (const spark::Error& e) {
    if (e.status() != SPARK_ERROR_INVALID_ARGUMENT || std::string_view(e.what()).find("'FILE'") == std::string_view::npos)
      __builtin_trap();
  }
  return 0;
}

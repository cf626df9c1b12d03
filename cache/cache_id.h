// Where an entry lives: the content hash of everything a compile depends on, and the
// directory name made from it.  Computed from a rendered source before a compile, and
// again from an entry's own manifest and source when the entry is checked, so an entry
// whose manifest claims a hash its contents do not give is refused.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cache/manifest.h"

namespace spark {

// Everything an entry's content hash covers.  No path: a cache copied to another
// directory or host still hits.  The key's name includes the arch.
struct CacheKeyParts {
  int format_version = kCacheFormatVersion;
  int generator_version = 0;  // the op's renderer version
  std::string key;
  std::string source;
  std::string templates_digest;
  std::string nvrtc_version;
  std::vector<std::string> options;
};

struct CacheId {
  std::string hash;  // 32 lowercase hex digits
  std::string name;  // "<key>-<first 16 hex digits>"
};

CacheId cache_id(const CacheKeyParts& parts);
// The parts an entry's manifest and source record.
CacheKeyParts cache_key_parts(const Manifest& manifest, const std::string& source);

// "<key>-<16 lowercase hex digits>" with a key exactly as its op prints it (core/key_name.h,
// is_op_key_name): a directory name the cache may have published.  Nothing else in a cache root is an entry,
// and a name that passes holds no path separator, no control character and no escape.
bool is_entry_name(std::string_view name);

}  // namespace spark

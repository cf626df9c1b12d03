#include "cache/cache_id.h"

#include <xxhash.h>

#include <fmt/format.h>

#include "core/key_name.h"

namespace spark {

CacheId cache_id(const CacheKeyParts& parts) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  auto feed = [&](std::string_view field, std::string_view value) {
    const uint64_t sizes[2] = {field.size(), value.size()};
    XXH3_128bits_update(st, sizes, sizeof sizes);
    XXH3_128bits_update(st, field.data(), field.size());
    XXH3_128bits_update(st, value.data(), value.size());
  };
  feed("format", std::to_string(parts.format_version));
  feed("generator", std::to_string(parts.generator_version));
  feed("key", parts.key);
  feed("source", parts.source);
  feed("templates", parts.templates_digest);
  feed("nvrtc", parts.nvrtc_version);
  for (const std::string& o : parts.options) feed("option", o);
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  CacheId id;
  id.hash = fmt::format("{:016x}{:016x}", h.high64, h.low64);
  id.name = parts.key + "-" + id.hash.substr(0, 16);
  return id;
}

CacheKeyParts cache_key_parts(const Manifest& m, const std::string& source) {
  CacheKeyParts p;
  p.format_version = m.format_version;
  p.generator_version = m.generator_version;
  p.key = m.key;
  p.source = source;
  p.templates_digest = m.templates_digest;
  p.nvrtc_version = m.nvrtc_version;
  p.options = m.options;
  return p;
}

bool is_entry_name(std::string_view name) {
  const size_t dash = name.rfind('-');
  if (dash == std::string_view::npos || name.size() - dash != 17) return false;
  for (const char c : name.substr(dash + 1))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return is_op_key_name(name.substr(0, dash));
}

}  // namespace spark

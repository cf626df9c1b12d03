#include "jit/templates.h"

#include <xxhash.h>

#include <fmt/format.h>

namespace spark {

const std::string& templates_digest() {
  static const std::string digest = [] {
    XXH3_state_t* st = XXH3_createState();
    XXH3_128bits_reset(st);
    for (const EmbeddedTemplate& t : embedded_templates()) {
      XXH3_128bits_update(st, t.name.data(), t.name.size());
      const uint64_t size = t.bytes.size();
      XXH3_128bits_update(st, &size, sizeof size);
      XXH3_128bits_update(st, t.bytes.data(), t.bytes.size());
    }
    const XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    return fmt::format("{:016x}{:016x}", h.high64, h.low64);
  }();
  return digest;
}

}  // namespace spark

// Key -> CUDA source.  The source only picks constants and includes the templates;
// the same key always renders byte-identical text that starts with the key.
#pragma once

#include <string>

#include "ops/mla_qproj/key.h"
#include "ops/mla_qproj/tiles.h"

namespace spark {

// Bumped whenever the generator's output for some key changes meaning.
inline constexpr int kGeneratorVersion = 12;
inline constexpr const char* kKernelEntryName = "spark_mla_qproj";

struct RenderedSource {
  KernelKey key;
  TileConfig tile;
  int threads = 0;
  int smem_bytes = 0;
  std::string source;
};

// Throws UNSUPPORTED for keys outside what spark implements (H, K, N, R, format, arch).
void check_key_supported(const KernelKey& key);
RenderedSource render(const KernelKey& key);

// A digest of every embedded template byte (hex); part of every cache key.
const std::string& templates_digest();

}  // namespace spark

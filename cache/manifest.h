// The JSON manifest of a cache entry: what was compiled, how, and how to verify it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cubin_elf.h"

namespace spark {

// Bumped whenever the entry layout or the manifest's meaning changes; old entries then miss.
// 2: the manifest records the source's checksum; entries carry a last_used stamp.
inline constexpr int kCacheFormatVersion = 2;

struct Manifest {
  int format_version = kCacheFormatVersion;
  std::string key;   // the kernel key's name (core/key_name.h)
  std::string hash;  // the full content hash (hex)
  int generator_version = 0;
  std::string nvrtc_version;
  std::string templates_digest;
  std::vector<std::string> options;
  std::string tile;
  int threads = 0;
  int smem_bytes = 0;
  uint64_t cubin_size = 0;
  std::string cubin_xxh3;  // hex XXH3-64 of the cubin
  uint64_t source_size = 0;
  std::string source_xxh3;  // hex XXH3-64 of kernel.cu
  double compile_ms = 0;
  KernelResources resources;
  int64_t created_unix_ms = 0;

  std::string to_json() const;
  // Throws CACHE when the text is not a manifest of this format.
  static Manifest from_json(const std::string& text);
};

std::string checksum_hex(const std::string& bytes);

}  // namespace spark

// Key -> CUDA source.  The source only picks constants and includes the templates;
// the same key always renders byte-identical text that starts with the key.
#pragma once

#include <string>

#include "jit/kernel_spec.h"
#include "ops/mla_qproj/key.h"
#include "ops/mla_qproj/tiles.h"

namespace spark {

// Bumped whenever the generator's output for some key changes meaning.
inline constexpr int kGeneratorVersion = 12;
// The kernel's __global__ function: kernel_symbol("mla_qproj") (core/key_name.h).
inline constexpr const char* kKernelEntryName = "spark_mla_qproj";

// A key's kernel as the JIT core takes it (KernelSpec: name, source, threads, shared
// memory), with the op's own view of it: the key's fields and the tile the plan launches.
struct RenderedSource : KernelSpec {
  KernelKey op_key;
  TileConfig tile;
};

// Throws UNSUPPORTED for keys outside what spark implements (H, K, N, R, format, arch).
TileConfig check_key_supported(const KernelKey& key);  // ... and the key's tile
RenderedSource render(const KernelKey& key);

}  // namespace spark

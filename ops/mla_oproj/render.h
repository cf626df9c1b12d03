// Key -> tile -> CUDA source for the MLA value up-projection.  The source picks constants
// and includes templates/mla_oproj.cuh; the same key always renders byte-identical text.
#pragma once

#include <string>
#include <vector>

#include "jit/kernel_spec.h"
#include "ops/mla_oproj/key.h"

namespace spark::oproj {

// Bumped whenever the generator's output for some key changes meaning.
inline constexpr int kGeneratorVersion = 1;
// The kernel's __global__ function: kernel_symbol("mla_oproj") (core/key_name.h).
inline constexpr const char* kKernelEntryName = "spark_mla_oproj";

// A CTA's work (templates/mla_oproj.cuh): BN columns of one head and 16 x TM rows of M,
// its warps split BN / 32 ways across the columns and KSPLIT ways along L.
struct Tile {
  int bn = 32;
  int ksplit = 8;
  int tm = 1;
  int bm() const { return 16 * tm; }
  int threads() const { return bn / 32 * ksplit * 32; }
  int smem_bytes() const { return ksplit * bm() * bn * 4; }
  std::string describe() const;
};

// The M-regimes, ordered by M, covering 1..8192.
const std::vector<MRegime>& regimes();
// The regimes needed for M in 1..max_m.
std::vector<MRegime> regimes_up_to(int max_m);
// The tile of a key (every arch spark targets has mma.sync and room for it).
Tile tile_for(const Key& key);

struct RenderedSource : KernelSpec {
  Key op_key;
  Tile tile;
};

// Throws UNSUPPORTED for keys outside what spark implements (shape, regime, arch).
RenderedSource render(const Key& key);

}  // namespace spark::oproj

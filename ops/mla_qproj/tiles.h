// Per-arch heuristics: the M-regime table and the tile shape of each regime.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "jit/arch.h"
#include "ops/mla_qproj/key.h"

namespace spark {

// The CTA tile of one regime and its schedule.  Per-tile (templates/mla_qproj.cuh): a CTA
// per BM x BN tile, stages 1, or 2 for a persistent double-buffered grid.  Weight-stationary
// (templates/mla_qproj_ws.cuh): a CTA keeps BN weight columns of one head in shared memory
// and streams M tiles through `stages` q stages; ksplit is 1.  Weight-stationary on wgmma
// (templates/mla_qproj_wg.cuh, sm_90a): `groups` teams of 64 x BN tiles share the weights,
// each with `stages` q stages of its own, a team being `nsplit` warp groups that split the
// tile's columns; bm = wm = 64, wn = bn.
struct TileConfig {
  int bm = 16, bn = 32;  // CTA tile
  int wm = 16, wn = 16;  // warp tile
  int ksplit = 1;        // warp groups splitting K
  int stages = 1;        // see above (0: the schedule's default)
  bool stationary = false;
  bool wgmma = false;    // stationary on warp-group MMAs
  int groups = 1;        // wgmma: teams, each taking every groups-th tile
  int nsplit = 1;        // wgmma: warp groups per team, splitting BN
  int kchunk = 0;        // per-tile: weight rows per K chunk, each waited for on its own (0: the whole K)
  int ring = 1;          // ... and ring slots the chunks stream through (bf16; MXFP8: every chunk)
  bool flat_copies = false;  // per-tile: bf16 weight copies by a flat index loop, not row steps
  // __launch_bounds__ minimum CTAs per SM, which caps registers per thread: 2 keeps room
  // for two CTAs, 1 lets one CTA alone use them all, 0 leaves the choice to ptxas.
  // tile_config() fills it in where a table left -1.
  int min_blocks = -1;

  int threads() const { return wgmma ? groups * nsplit * 128 : (bm / wm) * (bn / wn) * ksplit * 32; }
  // Shared memory of one stage of the per-tile kernel (a tile's copies, reused by its epilogue).
  int stage_bytes(int k, OutDtype out, WeightFormat weights) const;
  // Dynamic shared memory; the rendered source static_asserts the kernel agrees.
  int smem_bytes(int k, OutDtype out, WeightFormat weights) const;
  std::string describe() const;
};

struct RegimeEntry {
  MRegime regime;
  TileConfig tile;
};

// "LO-HI:BMxBNxWMxWNxKSPLIT[xSTAGES][:kKCHUNKxRING],..." (per-tile), "LO-HI:ws:BMxBNxWMxWNxSTAGES"
// (weight-stationary) or "LO-HI:wg:BNxGROUPSxSTAGES[xNSPLIT]" (weight-stationary on wgmma)
// items -> a table (throws INVALID_ARGUMENT naming the item and the rule it breaks);
// the format of the SPARK_REGIMES tuning override.  Numbers are plain decimal digits (no sign,
// no space), each held to its field's range before anything computes with it: LO and HI in
// 1..8192, the regimes contiguous from 1 to 8192; BM 16..1024 in WM x WN warps, multiples of
// 16 that divide BM x BN, at most 1024 threads; per-tile BN 32, 64 or 128, KSPLIT 1, 2 or 4,
// STAGES 0..2, KCHUNK 16, 32 or 64 (whole 16 x KSPLIT steps, one stage), RING 1..1024;
// weight-stationary BN 128, 256 or 512, STAGES 2..4; wgmma BN 128 or 256, GROUPS 1..3,
// STAGES 2..4, NSPLIT 1 or 2 (2 at BN 256), at most four warp groups.
std::vector<RegimeEntry> parse_regime_table(std::string_view text);
// The regimes for an arch, ordered by M, covering 1..8192 without gaps.  SPARK_REGIMES,
// when set, replaces the built-in table (for tuning; the same on every arch).
std::vector<RegimeEntry> regime_table(std::string_view arch);
// The regime serving m (1..8192).
RegimeEntry regime_for_m(std::string_view arch, int m);
// Every regime needed for M in 1..max_m.
std::vector<RegimeEntry> regimes_up_to(std::string_view arch, int max_m);
// The tile for a key; throws UNSUPPORTED when the key's regime is not one of the table's.
TileConfig tile_config(const KernelKey& key);

}  // namespace spark

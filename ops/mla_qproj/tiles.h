// The tile of every key: a table (ops/mla_qproj/tiles.table, embedded at build time) whose
// rows select by arch, M regime, heads, K, weight format and output, first match wins.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jit/arch.h"
#include "ops/mla_qproj/key.h"

namespace spark {

// The CTA tile of one regime and its schedule.  Per-tile (templates/mla_qproj.cuh): a CTA
// per BM x BN tile, one stage.  Weight-stationary
// (templates/mla_qproj_ws.cuh): a CTA keeps BN weight columns of one head in shared memory
// and streams M tiles through `stages` q stages; ksplit is 1.  Weight-stationary on wgmma
// (templates/mla_qproj_wg.cuh, sm_90a): `groups` teams of 64 x BN tiles share the weights,
// each with `stages` q stages of its own, a team being `nsplit` warp groups that split the
// tile's columns; bm = wm = 64, wn = bn.  Register-streamed (templates/mla_qproj_rs.cuh, FP8
// weights): a CTA per 16 x BN tile whose `ksplit` warps each stream K / ksplit weight rows
// through registers; bm = wm = 16, wn = bn.
struct TileConfig {
  int bm = 16, bn = 32;  // CTA tile
  int wm = 16, wn = 16;  // warp tile
  int ksplit = 1;        // warp groups splitting K
  int stages = 1;        // see above (0: the schedule's default)
  bool stationary = false;
  bool wgmma = false;    // stationary on warp-group MMAs
  bool streamed = false; // register-streamed FP8 weights
  int groups = 1;        // wgmma: teams, each taking every groups-th tile
  int nsplit = 1;        // wgmma: warp groups per team, splitting BN
  int kchunk = 0;        // per-tile: weight rows per K chunk, each waited for on its own (0: the whole K)
  int ring = 1;          // ... and ring slots the chunks stream through (a table's kRingPerChunk: one each)
  bool flat_copies = false;  // per-tile: bf16 weight copies by a flat index loop, not row steps
  // __launch_bounds__ minimum CTAs per SM, which caps registers per thread: 2 keeps room
  // for two CTAs, 1 lets one CTA alone use them all, 0 leaves the choice to ptxas
  // (min_blocks_for(): a rule of the tile, not a table column).
  int min_blocks = 0;

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

// A table row's ring for "a slot per K chunk" (":kCHUNK" without "xRING").
inline constexpr int kRingPerChunk = 0;

// One row of a tile table: selectors, then the tile as written.
struct TileRow {
  std::vector<std::string> archs;       // empty: every arch
  MRegime m;                            // the regime (an arch's rows' M ranges are its regimes)
  int heads_min = 1, heads_max = kMaxHeads;
  int k = 0;                            // 0: any K
  std::vector<WeightFormat> weights;    // empty: any
  std::optional<OutDtype> out;          // empty: any
  TileConfig tile;
  std::string evidence;                 // the measurement that chose it
  int line = 0;                         // in the table's text

  bool matches(const KernelKey& key) const;
};

struct TileTable {
  std::string origin;  // where the text came from, for messages
  std::vector<TileRow> rows;
};

// The grammar of tiles.table (its header says it): "group NAME = arch,..." lines and rows
// of seven columns.  Throws INVALID_ARGUMENT naming the line and the rule it breaks,
// including an arch whose rows' M ranges do not split 1..8192 into regimes.
TileTable parse_tile_table(std::string_view text, std::string_view origin);
// ops/mla_qproj/tiles.table, parsed once.
const TileTable& builtin_tile_table();
// The embedded bytes of tiles.table (generated at build time).
std::string_view embedded_tile_table();

// "LO-HI:BMxBNxWMxWNxKSPLIT[:kKCHUNK[xRING]][:flat],..." (per-tile), "LO-HI:ws:BMxBNxWMxWNxSTAGES"
// (weight-stationary) or "LO-HI:wg:BNxGROUPSxSTAGES[xNSPLIT]" (weight-stationary on wgmma)
// items -> regimes and tiles (throws INVALID_ARGUMENT naming the item and the rule it
// breaks): the SPARK_REGIMES tuning override, whose tiles are read by the same reader as the
// table's.  Numbers are plain decimal digits (no sign, no space), each held to its field's
// range before anything computes with it: LO and HI in 1..8192, the regimes contiguous from 1
// to 8192; BM 16..1024 in WM x WN warps, multiples of 16 that divide BM x BN, at most 1024
// threads; per-tile BN 32, 64 or 128, KSPLIT 1, 2 or 4, KCHUNK 16, 32 or 64 (whole 16 x KSPLIT
// steps), RING 1..1024; weight-stationary BN 128, 256 or 512, STAGES 2..4; wgmma BN 128 or
// 256, GROUPS 1..3, STAGES 2..4, NSPLIT 1 or 2 (2 at BN 256), at most four warp groups.
std::vector<RegimeEntry> parse_regime_table(std::string_view text);
// Those regimes as a table: one row each, for every arch and shape.
TileTable tile_table_from_regimes(const std::vector<RegimeEntry>& regimes);
// SPARK_REGIMES's table when it is set (read once), else the built-in one.
const TileTable& active_tile_table();

// An arch's regimes in a table, ordered by M.
std::vector<MRegime> table_regimes(const TileTable& table, std::string_view arch);
// The tile of a key: the first row that matches, its ring fitted to K, its launch bounds
// from min_blocks_for.  Throws UNSUPPORTED when no row matches.  Pure.
TileConfig tile_config(const KernelKey& key, const TileTable& table);
int min_blocks_for(const TileConfig& tile);

// On the active table:
// The regimes for an arch, ordered by M, covering 1..8192 without gaps, each with the tile
// of its first row.
std::vector<RegimeEntry> regime_table(std::string_view arch);
// The regime serving m (1..8192).
RegimeEntry regime_for_m(std::string_view arch, int m);
// Every regime needed for M in 1..max_m.
std::vector<RegimeEntry> regimes_up_to(std::string_view arch, int max_m);
// The tile for a key; throws UNSUPPORTED for an arch spark does not target or a regime
// that is not one of the arch's.
TileConfig tile_config(const KernelKey& key);

}  // namespace spark

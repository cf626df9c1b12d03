// Key -> tile -> CUDA source for the MLA value up-projection.  The source picks constants
// and includes the schedule's template; the same key always renders byte-identical text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "jit/kernel_spec.h"
#include "ops/mla_oproj/key.h"

namespace spark::oproj {

// Bumped whenever the generator's output for some key changes meaning.
inline constexpr int kGeneratorVersion = 8;
// The kernel's __global__ function: kernel_symbol("mla_oproj") (core/key_name.h).
inline constexpr const char* kKernelEntryName = "spark_mla_oproj";

// A CTA's work.  Tiled (templates/mla_oproj.cuh, every arch): BN columns of one head and
// 16 x TM rows of M, its warps split BN / 32 ways across the columns and KSPLIT ways along
// L.  Stationary (templates/mla_oproj_wg.cuh, sm_90a): one or two warp groups (`groups`
// teams) that keep 128 columns of one head's weights in shared memory for a range of 64-row
// M tiles, taking the tiles in turn, each team streaming o through its `stages` 64 x 64
// stages.  Ring (templates/mla_oproj_ring.cuh, M <= 32): a
// persistent CTA, two per SM, that walks (head, BN columns) units of 16 x TM rows,
// warps as the tiled tile's, streaming their weights through `stages` shared-memory slots
// and leaving room on the SM for the next kernel's CTA.  Pre-converted (templates/
// mla_oproj_pre.cuh, FP8 weights at decode): the tiled tile's warps, with every weight
// dequantised before the wait on the previous kernel, `reg_chunks` of a lane's 32-wide L
// chunks into registers and the rest into shared memory; `first` releases the next kernel at
// entry rather than past the wait.
struct Tile {
  bool stationary = false;
  bool ring = false;
  bool pre = false;
  int reg_chunks = 0;  // pre
  bool first = false;  // pre
  int bn = 32;
  int ksplit = 8;
  int tm = 1;
  int stages = 0;  // stationary (per team) and ring
  int groups = 1;  // stationary: warp groups (teams) sharing the weights
  int bm() const { return stationary ? 64 : 16 * tm; }
  int threads() const { return stationary ? 128 * groups : bn / 32 * ksplit * 32; }
  // Dynamic shared memory on the key's arch (the stationary schedule stages outputs of the
  // key's dtype, the ring holds weights of its format and fills half an SM).
  int smem_bytes(const Key& key) const;
  std::string describe() const;
};

// The schedule.  Auto, the default, takes per key what spark-bench measured fastest
// (docs/oproj.md#kernels): on sm_90a the weight-stationary kernel past M = 64 (FP8 weights
// with few heads: past 128 or 256), at M 17-64 where the heads give it enough CTAs, and at
// decode for many heads with bf16 weights; below that the persistent ring at M 17-32 and the
// tiled kernel at decode and 33-64; off sm_90a the tiled kernel at decode, the ring at 17-32,
// then tiled.  The pre-converted tile is reached only through SPARK_OPROJ_TILES.
// SPARK_OPROJ_SCHEDULE ("auto", "tiled" or "stationary") overrides it: tiled everywhere, or
// stationary past decode (M > 16) on sm_90a and tiled at decode.  The rendered sources
// differ, so the cache never mixes their entries.
enum class Schedule { kAuto, kTiled, kStationary };
// "auto", "tiled" or "stationary"; anything else throws INVALID_ARGUMENT naming the variable.
Schedule parse_schedule(std::string_view text);
// SPARK_OPROJ_SCHEDULE, read once (unset: auto).
Schedule active_schedule();

// A regime and the tile that serves it: an item of SPARK_OPROJ_TILES.
struct RegimeTile {
  MRegime regime;
  Tile tile;
};

// How keys get their tiles: the built-in regimes (1-8, 9-16, 17-32, 33-64, 65-128, 129-256,
// 257-512, 513-1023, 1024-8192) under `schedule`, or a tuning override's own regimes and tiles.
struct Tiling {
  Schedule schedule = Schedule::kAuto;
  std::vector<RegimeTile> override_table;  // empty: the built-in regimes
  Tiling() = default;
  Tiling(Schedule s) : schedule(s) {}  // NOLINT(google-explicit-constructor): render(key, kStationary)
  explicit Tiling(std::vector<RegimeTile> table) : override_table(std::move(table)) {}
};

// "LO-HI:BNxKSPLITxTM" (tiled), "LO-HI:wg:STAGES[xTEAMS]" (stationary, sm_90a; elsewhere that
// regime takes its built-in tiled tile), "LO-HI:ring:BNxKSPLITxSTAGES" (ring; on an arch
// where two of its CTAs do not fit an SM, the built-in tiled tile) or
// "LO-HI:pre:BNxKSPLITxREG[f]" (pre-converted; bf16 weights, and an arch where two of its CTAs
// do not fit an SM, take the built-in tiled tile) items -> regimes and
// tiles, the SPARK_OPROJ_TILES tuning override (throws INVALID_ARGUMENT naming the item and
// the rule it breaks).  LO and HI in 1..8192, the regimes contiguous from 1 to 8192.  Tiled:
// BN 32, 64 or 128; KSPLIT 4, 8 or 16 (warps along L = 512: fewer would hold more weights
// per lane than its registers); TM 1..4; at most 512 threads (BN / 32 x KSPLIT <= 16), and
// at 512 threads 16 / KSPLIT + TM <= 5 (the registers a lane has then).  wg: STAGES 3..10
// per team, TEAMS 1 (default) or 2, within sm_90a's shared memory (two teams: 5 stages).
// ring: HI <= 32 (16-row tiles per unit: one, or two past M = 16, which only a 128-thread
// ring has the registers for), BN 32 or 64, KSPLIT 4 or 8, at most 256 threads and KSPLIT 8
// at 256 (registers; so BN 64 has no ring yet), STAGES 2..4.  pre: HI <= 16, BN 32, 64 or
// 128, KSPLIT 1, 2 or 4 (a lane's L range whole 128-wide scale blocks), REG chunks of the
// lane's in registers within what two CTAs an SM leave a lane (16 each, ~64 for the rest,
// within 224), and the tile's shared memory within half an sm_90a SM.  A tile's shared
// memory is checked against the arch when a key is rendered.
std::vector<RegimeTile> parse_tile_override(std::string_view text);
// SPARK_OPROJ_SCHEDULE and SPARK_OPROJ_TILES, read once; setting both is INVALID_ARGUMENT.
const Tiling& active_tiling();

// The M-regimes, ordered by M, covering 1..8192.
std::vector<MRegime> regimes(const Tiling& tiling = active_tiling());
// The regimes needed for M in 1..max_m.
std::vector<MRegime> regimes_up_to(int max_m, const Tiling& tiling = active_tiling());

// The tile of a key, as the tiling's schedule says (a schedule an arch cannot run falls back
// to the tiled tile, which every arch has: mma.sync and room for it).
Tile tile_for(const Key& key, const Tiling& tiling = active_tiling());

// The M chunks a stationary launch splits each (head, 128 columns) block into, at M tiles
// of 64 rows, `resident` CTAs on the device: as ops/common/schedule.h counts them in rounds
// of one tile a team; with bf16 weights and several teams, one team's count where that
// gives more CTAs, in chunks of more tiles than teams (FP8 weights keep the rounds: each CTA
// dequantises its whole slice).
long long stationary_chunks(const Tile& tile, WeightFormat weights, long long blocks, long long tiles_m,
                            long long resident);

struct RenderedSource : KernelSpec {
  Key op_key;
  Tile tile;
};

// Throws UNSUPPORTED for keys outside what spark implements (shape, regime, arch).
RenderedSource render(const Key& key, const Tiling& tiling = active_tiling());

}  // namespace spark::oproj

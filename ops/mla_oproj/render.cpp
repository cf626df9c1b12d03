#include "ops/mla_oproj/render.h"

#include <algorithm>
#include <iterator>

#include "core/env.h"
#include "core/error.h"
#include "jit/arch.h"
#include "ops/common/regime_text.h"
#include "ops/common/schedule.h"

namespace spark::oproj {

namespace {

// The stationary schedule: one warp group with a ring of ten o stages, or two teams of
// five (bench/NOTES.md v23, v24).
constexpr int kWgStages = 10;
constexpr int kWgTeamStages = 5;
// Decode (M <= 16) is two regimes, split here: at 9-16 the tiled tile at 32 blocks is
// narrower than at 1-8 (bench/NOTES.md v30, v37).
constexpr int kDecodeSplitM = 8;
// The tiled kernel's CTAs are 64 columns wide from this many (head, 128 columns) blocks, but
// for this many exactly at M 9-16.
constexpr int kWideTiledMinBlocks = 32;
// At decode the stationary kernel's decode form beats the tiled tile from this many blocks
// with bf16 weights, with either output (bench/NOTES.md v25).
constexpr int kStationaryDecodeMinBlocks = 64;
// The fewest (head, 128 columns) blocks with which the auto schedule takes the stationary
// kernel, for bf16 weights, at M 17-32 and 33-64; FP8 weights need twice as many, and past
// M = 64 the table below decides (bench/NOTES.md v21).
constexpr int kStationaryMinBlocksM32 = 64;
constexpr int kStationaryMinBlocksM64 = 32;

// The built-in regimes past M = 64, and what each gives the stationary kernel.
//  - fp8_tiled_max_blocks: FP8 weights stay on the tiled kernel up to this many (head, 128
//    columns) blocks.  The stationary kernel dequantises a head's whole slice before its
//    first MMA (a flat ~4.8 us at 8-16 heads on an H100), which few M tiles do not repay;
//    the tiled kernel re-reads the weights by 32-row tiles instead (bench/NOTES.md v27, v36).
//  - teams_min_blocks_*: two teams from this many blocks.  Two teams pay where each CTA has
//    several tiles (one team's epilogue and barriers run under the other's MMAs), so from
//    fewer blocks as M grows; with fewer tiles a CTA, one team and its deeper ring fetch a
//    tile sooner.  FP8 weights take them from fewer blocks than bf16 past M = 128: each team
//    converts half of every weight row before the wait, so the flat dequantisation halves
//    too (bench/NOTES.md v24, v28, v35, v36, v37).
struct PastM64Regime {
  int m_max;
  int fp8_tiled_max_blocks;
  int teams_min_blocks_bf16;
  int teams_min_blocks_fp8;
};
constexpr PastM64Regime kPastM64[] = {
    // m_max  fp8_tiled_max_blocks  teams_min_blocks_bf16  teams_min_blocks_fp8
    {128, 16, 64, 64},
    {256, 8, 32, 20},
    {512, 0, 32, 16},
    {1023, 0, 16, 8},
    {kMaxM, 0, 0, 0},
};
constexpr int kL = 512;

}  // namespace

namespace {

// The shared memory of one CTA when two share an SM, on an arch whose per-block maximum is
// `per_block` (each CTA also costs the SM 1 KB, so the SM has per_block + 1 KB).
int half_sm_smem(int per_block) { return (per_block + 1024) / 2 - 1024; }
// A ring CTA's least shared memory: a third of the SM (less its 1 KB) rounded up past it to
// whole 16-byte vectors, so that no third CTA fits beside it and the next kernel's.
int ring_smem_floor(int per_block) { return ((per_block + 1024) / 3 - 1024) / 16 * 16 + 16; }

// The stationary kernel's shared memory: the weights (L / 64 blocks of 128 rows x 128
// bytes), each team's o stages (64 rows x 128 bytes) and four warps' output staging (16 rows
// x (64 columns + 16 bytes)), and 1 KB to align.
int stationary_smem(int stages, int groups, int out_bytes) {
  return kL / 64 * 128 * 128 + groups * (stages * 64 * 128 + 4 * 16 * (64 * out_bytes + 16)) + 1024;
}

}  // namespace

int Tile::smem_bytes(const Key& key) const {
  if (stationary) return stationary_smem(stages, groups, key.out == OutDtype::kBf16 ? 2 : 1);
  if (pre) {
    // bf16 chunks in shared memory (16 bytes a lane a row a chunk), and the larger of the
    // register chunks' FP8 staging (8 bytes each) with the scale words (4 bytes a lane a row
    // per four chunks) and the partial sums.
    const int chunks = kL / ksplit / 32, lanes = threads();
    const int staging = reg_chunks * 4 * lanes * 8 + 4 * (chunks / 4) * lanes * 4, partials = ksplit * 16 * bn * 4;
    return (chunks - reg_chunks) * 4 * lanes * 16 + std::max(staging, partials);
  }
  const int partials = ksplit * bm() * bn * 4;  // every warp row's partial sums
  const bool fp8 = key.weights != WeightFormat::kBf16;
  // The tiled kernel keeps FP8 weights (BN rows of L bytes) in shared memory across the wait
  // at decode (one M tile a warp).
  if (!ring) return partials + (fp8 && tm == 1 ? bn * kL : 0);
  // The slots (BN rows of L weights; FP8 also L / 32 bytes of scales a row) and the partial
  // sums, raised to the ring's floor.
  const int slot = bn * (fp8 ? kL + kL / 32 : 2 * kL);
  return std::max(stages * slot + partials, ring_smem_floor(arch_info(key.arch).max_smem_per_block));
}

std::string Tile::describe() const {
  if (stationary)
    return groups == 1 ? fmt::format("weight-stationary wgmma, 64x{} tiles, {} o stages, {} threads", bn, stages,
                                     threads())
                       : fmt::format("weight-stationary wgmma, 64x{} tiles, {} teams of {} o stages, {} threads", bn,
                                     groups, stages, threads());
  if (pre)
    return fmt::format("pre-converted FP8 decode, 16x{} CTA tile, {} warps along L, {} of {} chunks in registers, {} "
                       "threads{}",
                       bn, ksplit, reg_chunks, kL / ksplit / 32, threads(), first ? ", next kernel released at entry" : "");
  if (ring)
    return fmt::format("persistent ring, {}x{} units, {} warps along L, {} weight slots, {} threads", bm(), bn,
                       ksplit, stages, threads());
  return fmt::format("{}x{} CTA tile, {} warps along L, {} threads", bm(), bn, ksplit, threads());
}

namespace {

// Decode keeps one 16-row tile per warp (tiled; at many heads with bf16 weights and output the
// stationary kernel's 64-row tile).  Past it, two 16-row tiles per warp (tiled, ring),
// so each weight fragment serves 32 rows; or on sm_90a each head's weights kept in shared
// memory across 64-row M tiles (stationary, wgmma).  Decode is split at kDecodeSplitM, and
// M 17-32, 33-64 and each row of kPastM64 are regimes of their own, because the kernel, tile
// or team count that wins there depends on the heads and the weight format.
std::vector<MRegime> builtin_regimes() {
  std::vector<MRegime> out{{1, kDecodeSplitM}, {kDecodeSplitM + 1, 16}, {17, 32}, {33, 64}};
  for (const PastM64Regime& r : kPastM64) out.push_back({out.back().m_max + 1, r.m_max});
  return out;
}
const std::vector<MRegime> kBuiltinRegimes = builtin_regimes();

constexpr std::string_view kOverrideGrammar =
    "LO-HI:BNxKSPLITxTM (tiled, e.g. 1-16:32x8x1), LO-HI:wg:STAGES[xTEAMS] (weight-stationary wgmma on sm_90a, "
    "e.g. 17-8192:wg:10 or 65-8192:wg:5x2), LO-HI:ring:BNxKSPLITxSTAGES (a persistent decode ring, HI <= 32, e.g. "
    "1-16:ring:32x4x3) or LO-HI:pre:BNxKSPLITxREG[f] (FP8 decode dequantised before the wait, HI <= 16, e.g. "
    "1-16:pre:128x2x4f)";

Tile stationary_tile(int stages, int groups) {
  Tile t;
  t.stationary = true;
  t.bn = 128;
  t.stages = stages;
  t.groups = groups;
  return t;
}

// The key's (head, 128 columns) blocks: the stationary kernel's CTAs per M chunk, by which
// the auto schedule's thresholds count.
int column_blocks(const Key& key) { return key.heads * key.v / 128; }

// The tiled tile for a key's heads and M range.  Few heads (under 32 blocks): 32-column CTAs
// (eight warps along L) so more CTAs share the weight read; many heads fill the machine with
// 64-column CTAs (four along L).
Tile builtin_tiled(const Key& key) {
  Tile t;
  const int blocks = column_blocks(key);
  const bool narrow = blocks < kWideTiledMinBlocks;
  t.tm = key.regime.m_max <= 16 ? 1 : 2;
  // At M 9-16 a key of exactly kWideTiledMinBlocks blocks (H = 32 at V = 128, 16 at V = 256)
  // takes 32-column CTAs too, four along L: 128 CTAs instead of 64, on an H100 0.86-0.96x the
  // time with bf16 weights and 0.84-0.99x with FP8 (bench/NOTES.md v37).
  const bool upper_decode = t.tm == 1 && key.regime.m_min > kDecodeSplitM && blocks == kWideTiledMinBlocks;
  t.bn = narrow || upper_decode ? 32 : 64;
  // Narrow keys split L eight ways, but at decode with bf16 weights four (128 threads): on an
  // H100 0.92-0.96x the eight-way time at 8-16 heads, either output (bench/NOTES.md v29).
  t.ksplit = narrow && !(t.tm == 1 && key.weights == WeightFormat::kBf16) ? 8 : 4;
  return t;
}

// ring:BNxKSPLITxSTAGES, past "ring:", to the item's end.
Tile read_ring_tile(ItemReader& r) {
  Tile t;
  t.ring = true;
  t.bn = r.number("BN", 32, 64);
  r.expect("x");
  t.ksplit = r.number("KSPLIT", 4, 8);
  r.expect("x");
  t.stages = r.number("STAGES", 2, 4);
  r.expect_end();
  SPARK_CHECK(t.bn == 32 || t.bn == 64, SPARK_ERROR_INVALID_ARGUMENT, "{}: a ring's BN must be 32 or 64 (got {})",
              r.item(), t.bn);
  SPARK_CHECK(t.ksplit == 4 || t.ksplit == 8, SPARK_ERROR_INVALID_ARGUMENT,
              "{}: a ring's KSPLIT must be 4 or 8: each lane keeps its share of L = {} of a head's o rows in "
              "registers, twice (got {})",
              r.item(), kL, t.ksplit);
  // Two CTAs share the SM's 64 K registers: 128 a lane at 256 threads, of which a head's o
  // fragments and the next head's take 256 / KSPLIT.
  SPARK_CHECK(t.threads() <= 256, SPARK_ERROR_INVALID_ARGUMENT,
              "{}: a ring of {} threads (BN / 32 x KSPLIT warps) is more than 256, the most of which two CTAs keep "
              "128 registers a lane",
              r.item(), t.threads());
  SPARK_CHECK(t.threads() < 256 || t.ksplit == 8, SPARK_ERROR_INVALID_ARGUMENT,
              "{}: a ring of 256 threads needs KSPLIT 8: two such CTAs leave a lane 128 registers, and at KSPLIT {} "
              "the o fragments of two heads take {} of them",
              r.item(), t.ksplit, 256 / t.ksplit);
  return t;
}

// pre:BNxKSPLITxREG[f], past "pre:", to the item's end.
Tile read_pre_tile(ItemReader& r) {
  Tile t;
  t.pre = true;
  t.bn = r.number("BN", 32, 128);
  r.expect("x");
  t.ksplit = r.number("KSPLIT", 1, 16);
  r.expect("x");
  t.reg_chunks = r.number("REG", 0, 16);
  t.first = r.take("f");
  r.expect_end();
  const std::string item = r.item();
  SPARK_CHECK(t.bn == 32 || t.bn == 64 || t.bn == 128, SPARK_ERROR_INVALID_ARGUMENT,
              "{}: BN must be 32, 64 or 128 (got {})", item, t.bn);
  SPARK_CHECK(t.ksplit == 1 || t.ksplit == 2 || t.ksplit == 4, SPARK_ERROR_INVALID_ARGUMENT,
              "{}: KSPLIT must be 1, 2 or 4, so that a lane's L range is whole 128-wide scale blocks (got {})", item,
              t.ksplit);
  SPARK_CHECK(t.threads() <= 512, SPARK_ERROR_INVALID_ARGUMENT,
              "{}: the tile needs {} threads (BN / 32 x KSPLIT warps), more than 512", item, t.threads());
  const int chunks = kL / t.ksplit / 32;
  SPARK_CHECK(t.reg_chunks <= chunks, SPARK_ERROR_INVALID_ARGUMENT,
              "{}: REG must be at most a lane's {} L chunks (got {})", item, chunks, t.reg_chunks);
  // Two CTAs an SM leave a lane 65536 / (2 x threads) registers; a register chunk takes 16 of
  // them and the rest of the kernel about 64, within 224 (ptxas spills from 11 chunks at 255).
  const int lane_registers = std::min(224, 65536 / (2 * t.threads()));
  SPARK_CHECK(16 * t.reg_chunks + 64 <= lane_registers, SPARK_ERROR_INVALID_ARGUMENT,
              "{}: {} register chunks take {} registers a lane, and with the ~64 the rest needs more than the {} "
              "that two CTAs of {} threads leave",
              item, t.reg_chunks, 16 * t.reg_chunks, lane_registers, t.threads());
  const int half_sm = half_sm_smem(arch_info("sm_90a").max_smem_per_block);
  const int smem = t.smem_bytes(Key::of(1, 128, {1, 16}, WeightFormat::kMxfp8, OutDtype::kBf16, "sm_90a"));
  SPARK_CHECK(smem <= half_sm, SPARK_ERROR_INVALID_ARGUMENT,
              "{}: the tile needs {} bytes of shared memory, more than the {} of half an sm_90a SM (one of its CTAs "
              "and one of the next kernel's must share an SM)",
              item, smem, half_sm);
  return t;
}

// wg:STAGES, ring:BNxKSPLITxSTAGES, pre:BNxKSPLITxREG[f] or BNxKSPLITxTM, to the item's end.
Tile read_override_tile(ItemReader& r) {
  if (r.take("pre:")) return read_pre_tile(r);
  if (r.take("wg:")) {
    const int stages = r.number("STAGES", 3, 10);
    const int groups = r.take("x") ? r.number("TEAMS", 1, 2) : 1;
    r.expect_end();
    // The kernel runs on sm_90a only: its layout must fit that arch's shared memory with
    // bf16 output (the larger staging).
    const int smem = stationary_smem(stages, groups, 2), limit = arch_info("sm_90a").max_smem_per_block;
    SPARK_CHECK(smem <= limit, SPARK_ERROR_INVALID_ARGUMENT,
                "{}: {} teams of {} o stages need {} bytes of shared memory with bf16 output, more than sm_90a's {} "
                "(two teams take at most 5 stages)",
                r.item(), groups, stages, smem, limit);
    return stationary_tile(stages, groups);
  }
  if (r.take("ring:")) return read_ring_tile(r);
  Tile t;
  t.bn = r.number("BN", 32, 128);
  r.expect("x");
  t.ksplit = r.number("KSPLIT", 1, 16);
  r.expect("x");
  t.tm = r.number("TM", 1, 4);
  r.expect_end();
  const std::string item = r.item();
  SPARK_CHECK(t.bn == 32 || t.bn == 64 || t.bn == 128, SPARK_ERROR_INVALID_ARGUMENT,
              "{}: BN must be 32, 64 or 128 (got {})", item, t.bn);
  SPARK_CHECK(t.ksplit == 4 || t.ksplit == 8 || t.ksplit == 16, SPARK_ERROR_INVALID_ARGUMENT,
              "{}: KSPLIT must be 4, 8 or 16: each warp holds its share of L = {} of its columns' weights in "
              "registers, 64 per lane at 4 (got {})",
              item, kL, t.ksplit);
  SPARK_CHECK(t.threads() <= 512, SPARK_ERROR_INVALID_ARGUMENT,
              "{}: the tile needs {} threads (BN / 32 x KSPLIT warps), more than 512", item, t.threads());
  // A lane holds 16 registers of weights per 32-wide L chunk and 16 of sums per M tile; at
  // 512 threads it has 128 in all, and more than 5 x 16 of these spills.
  SPARK_CHECK(t.threads() < 512 || kL / 32 / t.ksplit + t.tm <= 5, SPARK_ERROR_INVALID_ARGUMENT,
              "{}: at 512 threads a lane has 128 registers, too few for {} L chunks of weights and {} M tiles of "
              "sums (16 / KSPLIT + TM must be at most 5)",
              item, kL / 32 / t.ksplit, t.tm);
  return t;
}

}  // namespace

std::vector<RegimeTile> parse_tile_override(std::string_view text) {
  std::vector<RegimeTile> table =
      read_regime_table<RegimeTile>(text, "SPARK_OPROJ_TILES", kOverrideGrammar, kMaxM, read_override_tile);
  for (RegimeTile& e : table) {
    SPARK_CHECK(!e.tile.pre || e.regime.m_max <= 16, SPARK_ERROR_INVALID_ARGUMENT,
                "SPARK_OPROJ_TILES: '{}-{}:pre:...': a pre-converted tile serves decode only (one 16-row M tile), so "
                "its HI must be at most 16",
                e.regime.m_min, e.regime.m_max);
    if (!e.tile.ring) continue;
    const std::string item = fmt::format("SPARK_OPROJ_TILES: '{}-{}:ring:{}x{}x{}'", e.regime.m_min, e.regime.m_max,
                                         e.tile.bn, e.tile.ksplit, e.tile.stages);
    SPARK_CHECK(e.regime.m_max <= 32, SPARK_ERROR_INVALID_ARGUMENT,
                "{}: a ring serves M up to 32 (one or two 16-row tiles per unit), so its HI must be at most 32", item);
    // Rows past 16 take a second 16-row tile: twice the o fragments, which only a 128-thread
    // ring (up to 255 registers a lane) has room for.
    e.tile.tm = e.regime.m_max > 16 ? 2 : 1;
    SPARK_CHECK(e.tile.tm == 1 || e.tile.threads() == 128, SPARK_ERROR_INVALID_ARGUMENT,
                "{}: past M = 16 a ring holds two 16-row tiles of o fragments, room a lane has only in a 128-thread "
                "ring (BN 32, KSPLIT 4), not in {} threads",
                item, e.tile.threads());
  }
  return table;
}

const Tiling& active_tiling() {
  // Read once: the choice changes the rendered sources, so cache entries never mix.
  static const Tiling tiling = [] {
    const auto text = env_string("SPARK_OPROJ_TILES");
    if (!text) return Tiling(active_schedule());
    SPARK_CHECK(!env_string("SPARK_OPROJ_SCHEDULE"), SPARK_ERROR_INVALID_ARGUMENT,
                "SPARK_OPROJ_TILES and SPARK_OPROJ_SCHEDULE are both set: the tile override names each regime's "
                "schedule itself (unset one of them)");
    return Tiling(parse_tile_override(*text));
  }();
  return tiling;
}

std::vector<MRegime> regimes(const Tiling& tiling) {
  if (tiling.override_table.empty()) return kBuiltinRegimes;
  std::vector<MRegime> out;
  for (const RegimeTile& e : tiling.override_table) out.push_back(e.regime);
  return out;
}

std::vector<MRegime> regimes_up_to(int max_m, const Tiling& tiling) {
  std::vector<MRegime> out;
  for (const MRegime& r : regimes(tiling))
    if (r.m_min <= max_m) out.push_back(r);
  return out;
}

Schedule parse_schedule(std::string_view text) {
  if (text == "auto") return Schedule::kAuto;
  if (text == "tiled") return Schedule::kTiled;
  if (text == "stationary") return Schedule::kStationary;
  throw Error(SPARK_ERROR_INVALID_ARGUMENT,
              fmt::format("SPARK_OPROJ_SCHEDULE: '{}' is not a schedule (auto, tiled or stationary)", text));
}

Schedule active_schedule() {
  // Read once: the choice changes the rendered sources, so cache entries never mix.
  static const Schedule schedule = [] {
    const auto text = env_string("SPARK_OPROJ_SCHEDULE");
    return text ? parse_schedule(*text) : Schedule::kAuto;
  }();
  return schedule;
}

namespace {

// The ring of the auto schedule for M 17-32: 128 threads (the most that hold two 16-row tiles
// of o fragments), two weight slots (bench/NOTES.md v21).
Tile auto_ring_tile() {
  Tile t;
  t.ring = true;
  t.bn = 32;
  t.ksplit = 4;
  t.tm = 2;
  t.stages = 2;
  return t;
}

bool ring_fits(const Tile& t, const Key& key) {
  return t.smem_bytes(key) <= half_sm_smem(arch_info(key.arch).max_smem_per_block);
}

// The kPastM64 row of a built-in regime past M = 64.
const PastM64Regime& past_m64(const Key& key) {
  for (const PastM64Regime& r : kPastM64)
    if (key.regime.m_min <= r.m_max) return r;
  return kPastM64[std::size(kPastM64) - 1];
}

// Whether the stationary kernel beats the others for a key past decode (bench/NOTES.md v21,
// v27, v36).  It keeps one CTA per 128 columns of a head per M chunk and loads (FP8:
// dequantises, row by row) that head's whole weight slice before its first MMA, a fixed cost
// that up to M = 64 only many CTAs hide (with FP8 weights and few heads up to M = 128 or
// 256, kPastM64); the ring reads each weight once for all of M 17-32.
bool stationary_pays(const Key& key) {
  const int blocks = column_blocks(key);
  const bool fp8 = key.weights != WeightFormat::kBf16;
  if (key.regime.m_min > 64) return !(fp8 && blocks <= past_m64(key).fp8_tiled_max_blocks);
  return blocks >= (fp8 ? 2 : 1) * (key.regime.m_max <= 32 ? kStationaryMinBlocksM32 : kStationaryMinBlocksM64);
}

// Whether the stationary kernel beats the tiled tile at decode (M <= 16).  Its decode form
// (weights streamed into the MMAs block by block) does with bf16 weights from 64 blocks;
// FP8 weights are dequantised whole before its first MMA, so those stay tiled.  The choice
// never depends on the output dtype: the e4m3 output is the bf16 output's quantisation
// bit for bit, so both must come from one kernel's sums.
bool stationary_pays_at_decode(const Key& key) {
  return key.weights == WeightFormat::kBf16 && column_blocks(key) >= kStationaryDecodeMinBlocks;
}

// The built-in stationary tile for a key: past M = 64 two teams from the regime's
// kPastM64 block count, one team below.
Tile builtin_stationary(const Key& key) {
  bool two = false;
  if (key.regime.m_min > 64) {
    const PastM64Regime& r = past_m64(key);
    two = column_blocks(key) >= (key.weights == WeightFormat::kBf16 ? r.teams_min_blocks_bf16 : r.teams_min_blocks_fp8);
  }
  return two ? stationary_tile(kWgTeamStages, 2) : stationary_tile(kWgStages, 1);
}

}  // namespace

Tile tile_for(const Key& key, const Tiling& tiling) {
  // The wgmma schedule needs sm_90a, a ring two CTAs' room on an SM; elsewhere their
  // regimes take the tiled tile.
  const bool wgmma = key.arch == "sm_90a";
  for (const RegimeTile& e : tiling.override_table) {
    if (!(e.regime == key.regime)) continue;
    if (e.tile.stationary && !wgmma) return builtin_tiled(key);
    if (e.tile.ring && !ring_fits(e.tile, key)) return builtin_tiled(key);
    // Pre-converted tiles take FP8 weights on an arch where two of their CTAs fit an SM.
    if (e.tile.pre && (key.weights == WeightFormat::kBf16 || !ring_fits(e.tile, key))) return builtin_tiled(key);
    return e.tile;
  }
  if (key.regime.m_min <= 16) {
    const bool stationary = tiling.schedule == Schedule::kAuto && wgmma && stationary_pays_at_decode(key);
    return stationary ? builtin_stationary(key) : builtin_tiled(key);
  }
  switch (tiling.schedule) {
    case Schedule::kTiled:
      break;
    case Schedule::kStationary:
      if (wgmma) return builtin_stationary(key);
      break;
    case Schedule::kAuto: {
      if (wgmma && stationary_pays(key)) return builtin_stationary(key);
      const Tile ring = auto_ring_tile();
      if (key.regime.m_max <= 32 && ring_fits(ring, key)) return ring;
      break;
    }
  }
  return builtin_tiled(key);
}

long long stationary_chunks(const Tile& tile, WeightFormat weights, long long blocks, long long tiles_m,
                            long long resident) {
  // Rounds of a tile a team give each team a tile in every CTA; but where they leave SMs idle
  // that one team's count would fill, and that count's chunks still hold more tiles than
  // teams (a second round), it takes a tile off the critical path (bench/NOTES.md v35: 32
  // blocks at M 577-768, 96 CTAs of four tiles against 128 of three).
  const long long rounds = (tiles_m + tile.groups - 1) / tile.groups;
  const long long by_rounds = stationary_m_chunks(blocks, rounds, resident);
  if (tile.groups == 1 || weights != WeightFormat::kBf16) return by_rounds;
  const long long by_tiles = stationary_m_chunks(blocks, tiles_m, resident);
  return by_tiles > by_rounds && (tiles_m + by_tiles - 1) / by_tiles > tile.groups ? by_tiles : by_rounds;
}

RenderedSource render(const Key& key, const Tiling& tiling) {
  const std::string shape = shape_problem(key.heads, key.l, key.v);
  SPARK_CHECK(shape.empty(), SPARK_ERROR_UNSUPPORTED, "kernel key '{}': {}", key.name(), shape);
  bool known_regime = false;
  for (const MRegime& r : regimes(tiling)) known_regime = known_regime || r == key.regime;
  SPARK_CHECK(known_regime, SPARK_ERROR_UNSUPPORTED, "kernel key '{}': M {}-{} is not one of mla_oproj's regimes",
              key.name(), key.regime.m_min, key.regime.m_max);
  const ArchInfo& arch = arch_info(key.arch);  // throws UNSUPPORTED for an arch spark does not target

  RenderedSource r;
  r.op_key = key;
  r.tile = tile_for(key, tiling);
  r.key = key.name();
  r.arch = key.arch;
  r.generator_version = kGeneratorVersion;
  r.summary = r.tile.describe();
  r.threads = r.tile.threads();
  r.smem_bytes = r.tile.smem_bytes(key);
  SPARK_CHECK(r.smem_bytes <= arch.max_smem_per_block, SPARK_ERROR_UNSUPPORTED,
              "kernel key '{}': tile needs {} bytes of shared memory, {} allows {}", r.key, r.smem_bytes, key.arch,
              arch.max_smem_per_block);
  const char* out = key.out == OutDtype::kBf16 ? "spark::OutKind::kBf16" : "spark::OutKind::kE4m3";
  const char* weights = key.weights == WeightFormat::kBf16    ? "spark::WeightKind::kBf16"
                        : key.weights == WeightFormat::kMxfp8 ? "spark::WeightKind::kMxfp8"
                                                              : "spark::WeightKind::kFp8Block128";
  const Tile& t = r.tile;
  // The schedule's header, layout and driver.
  const char* header = t.stationary ? "mla_oproj_wg.cuh"
                       : t.ring     ? "mla_oproj_ring.cuh"
                       : t.pre      ? "mla_oproj_pre.cuh"
                                    : "mla_oproj.cuh";
  const char* config = t.stationary ? "MlaOprojWgConfig"
                       : t.ring     ? "MlaOprojRingConfig"
                       : t.pre      ? "MlaOprojPreConfig"
                                    : "MlaOprojConfig";
  const char* driver = t.stationary ? "mla_oproj_wg" : t.ring ? "mla_oproj_ring" : t.pre ? "mla_oproj_pre" : "mla_oproj";
  std::string choices;
  if (t.stationary) {
    // Decode streams the weights into the MMAs block by block (one team, one tile of <= 16 rows).
    const bool decode = key.regime.m_max <= 16 && t.groups == 1;
    choices = fmt::format("  static constexpr int kStages = {}, kGroups = {};\n  static constexpr bool kDecode = {};\n",
                          t.stages, t.groups, decode);
  } else if (t.pre) {
    choices = fmt::format(
        "  static constexpr int BN = {}, KSPLIT = {}, kRegChunks = {};\n  static constexpr bool kTriggerFirst = {};\n",
        t.bn, t.ksplit, t.reg_chunks, t.first);
  } else {
    choices = fmt::format("  static constexpr int BN = {}, KSPLIT = {}, {} = {};\n", t.bn, t.ksplit,
                          t.ring ? "kStages" : "TM", t.ring ? t.stages : t.tm);
    if (t.ring)
      choices += fmt::format("  static constexpr int TM = {}, kSmemFloor = {};\n", t.tm,
                             ring_smem_floor(arch.max_smem_per_block));
  }
  r.source = fmt::format(
      "// spark kernel {key}\n"
      "// generator v{gen}; tile {tile}; dynamic shared memory {smem} bytes\n"
      "#include \"{header}\"\n"
      "\n"
      "struct Choices {{\n"
      "  static constexpr int V = {v}, L = {l};\n"
      "{choices}"
      "  static constexpr spark::OutKind kOut = {out};\n"
      "  static constexpr spark::WeightKind kWeights = {weights};\n"
      "}};\n"
      "using Config = spark::{config}<Choices>;\n"
      "static_assert(Config::kThreads == {threads}, \"host and template disagree on threads\");\n"
      "static_assert(Config::kSmemBytes == {smem}, \"host and template disagree on shared memory\");\n"
      "\n"
      "extern \"C\" __global__ void __launch_bounds__({bounds}) {entry}(const spark::MlaOprojParams params) {{\n"
      "  spark::{driver}<Config>(params);\n"
      "}}\n",
      fmt::arg("key", r.key), fmt::arg("gen", kGeneratorVersion), fmt::arg("tile", r.summary),
      fmt::arg("smem", r.smem_bytes), fmt::arg("header", header),
      fmt::arg("v", key.v), fmt::arg("l", key.l), fmt::arg("choices", choices), fmt::arg("out", out),
      fmt::arg("weights", weights), fmt::arg("config", config),
      fmt::arg("threads", r.threads), fmt::arg("entry", kKernelEntryName),
      fmt::arg("bounds", t.ring || t.pre ? fmt::format("{}, 2", r.threads) : std::to_string(r.threads)),
      fmt::arg("driver", driver));
  return r;
}

}  // namespace spark::oproj

#include "ops/mla_qproj/tiles.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "core/env.h"
#include "core/error.h"

namespace spark {

int TileConfig::stage_bytes(int k, OutDtype out, WeightFormat weights) const {
  // Mirrors MlaQprojConfig::kStageBytes in templates/mla_qproj.cuh.
  const int out_bytes = out == OutDtype::kBf16 ? 2 : 1;
  // A, then bf16 weights (swizzled without padding from BN = 64) or MXFP8 raw bytes, one
  // word of scale bytes per K row and the decoded multipliers (one per row and 32 columns).
  const int b_rows = kchunk > 0 ? kchunk * ring : k;
  const int b = weights == WeightFormat::kMxfp8 ? k * (bn + 16) + k * 4 + k * (bn / 32) * 4
                                                : b_rows * (bn >= 64 ? bn : bn + 8) * 2;
  const int main = bm * (k + 8) * 2 + b;
  const int red = (ksplit - 1) * (bm / wm) * (bn / wn) * (wm / 16) * (wn / 8) * 4 * 32 * 4;
  const int staged = bm * (bn * out_bytes + 16);
  return (std::max(main, red + staged) + 127) / 128 * 128;
}

namespace {

TileConfig wgmma_stationary(int bn, int groups, int stages, int nsplit = 1) {
  TileConfig t{64, bn, 64, bn, 1, stages};
  t.stationary = t.wgmma = true;
  t.groups = groups;
  t.nsplit = nsplit;
  return t;
}

int round128(int bytes) { return (bytes + 127) / 128 * 128; }

// Mirrors MlaQprojWsConfig::kSmemBytes in templates/mla_qproj_ws.cuh.
int stationary_smem_bytes(const TileConfig& t, int k, OutDtype out, WeightFormat weights) {
  const int out_bytes = out == OutDtype::kBf16 ? 2 : 1;
  const int w = round128(k * (t.bn + 8) * 2);
  const int stage = round128(std::max(t.bm * (k + 8) * 2 + t.bm * (64 + 8) * 2, t.bm * (t.bn * out_bytes + 16)));
  const int raw = weights == WeightFormat::kMxfp8 ? k * (t.bn + 16) + k * (t.bn / 128) * 4 : 0;
  return w + stage + std::max((t.stages - 1) * stage, raw);
}

// Mirrors MlaQprojWgConfig::kSmemBytes in templates/mla_qproj_wg.cuh.
int wgmma_smem_bytes(const TileConfig& t, int k, OutDtype out, WeightFormat weights) {
  const int out_bytes = out == OutDtype::kBf16 ? 2 : 1;
  const int w = t.bn / 64 * k * 128;
  const int stage = 64 * k * 2;
  const int stage_cols = t.nsplit > 1 && out == OutDtype::kBf16 && k > 128 ? 32 : 64;
  const int staging = t.groups * t.nsplit * 4 * 16 * (stage_cols * out_bytes + 16);
  const int raw = weights == WeightFormat::kMxfp8 ? k * (t.bn + 16) + k * (t.bn / 128) * 4 : 0;
  return std::max(w + t.groups * t.stages * stage + staging, w + t.groups * stage + raw) + 1024;
}

}  // namespace

int TileConfig::smem_bytes(int k, OutDtype out, WeightFormat weights) const {
  if (wgmma) return wgmma_smem_bytes(*this, k, out, weights);
  if (stationary) return stationary_smem_bytes(*this, k, out, weights);
  return std::max(stages, 1) * stage_bytes(k, out, weights);
}

std::string TileConfig::describe() const {
  if (wgmma)
    return fmt::format("weight-stationary wgmma BN={} groups={}{} QSTAGES={} threads={}", bn, groups,
                       nsplit > 1 ? fmt::format(" NSPLIT={}", nsplit) : "", stages, threads());
  if (stationary)
    return fmt::format("weight-stationary BM={} BN={} WM={} WN={} QSTAGES={} threads={}", bm, bn, wm, wn, stages,
                       threads());
  return fmt::format("BM={} BN={} WM={} WN={} KSPLIT={} STAGES={}{}{} threads={}", bm, bn, wm, wn, ksplit, stages,
                     kchunk > 0 ? fmt::format(" KCHUNK={} RING={}", kchunk, ring) : "",
                     flat_copies ? " COPIES=flat" : "", threads());
}

namespace {

constexpr int kMaxRegimeM = 8192;
// Bounds that keep every size computed from a tile far inside int.  No CTA holds more than
// 1024 q rows in shared memory at K >= 128 (232448 bytes on the largest arch), and ring
// slots beyond K's chunk count are never used.
constexpr int kMaxTileRows = 1024;
constexpr int kMaxRing = 1024;

constexpr std::string_view kRegimeGrammar =
    "LO-HI:BMxBNxWMxWNxKSPLIT[xSTAGES][:kKCHUNKxRING][:flat] (e.g. 1-16:16x32x16x16x2 or 1-32:16x128x16x32x2:k64x2), "
    "LO-HI:ws:BMxBNxWMxWNxSTAGES (e.g. 129-8192:ws:64x256x32x64x2) or LO-HI:wg:BNxGROUPSxSTAGES[xNSPLIT] (e.g. "
    "129-8192:wg:256x2x2)";

// One SPARK_REGIMES item, read left to right.  A number is plain decimal digits (no sign, no
// space), read by from_chars and held to its field's range as it is read, so no rule after
// it divides by zero or multiplies past int (sscanf's %d checked neither: a number out of
// int's range is undefined behaviour for it, and glibc kept its low 32 bits).
class ItemReader {
 public:
  explicit ItemReader(std::string_view item) : item_(item), rest_(item) {}

  std::string_view item() const { return item_; }

  // Consumes `literal` where the rest starts with it.
  bool take(std::string_view literal) {
    if (rest_.substr(0, literal.size()) != literal) return false;
    rest_.remove_prefix(literal.size());
    return true;
  }

  void expect(std::string_view literal) {
    if (!take(literal)) malformed(fmt::format("'{}'", literal));
  }

  // The number of field `name`, in lo..hi.
  int number(std::string_view name, int lo, int hi) {
    size_t digits = 0;
    while (digits < rest_.size() && rest_[digits] >= '0' && rest_[digits] <= '9') ++digits;
    if (digits == 0) malformed(name);
    const std::string_view text = rest_.substr(0, digits);
    int value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    SPARK_CHECK(ec == std::errc() && value >= lo && value <= hi, SPARK_ERROR_INVALID_ARGUMENT,
                "SPARK_REGIMES: '{}': {} is {}, outside {}..{}", item_, name, text, lo, hi);
    rest_.remove_prefix(digits);
    return value;
  }

  void expect_end() {
    if (!rest_.empty()) malformed("the end of the item");
  }

 private:
  [[noreturn]] void malformed(std::string_view wanted) const {
    SPARK_FAIL(SPARK_ERROR_INVALID_ARGUMENT, "SPARK_REGIMES: '{}' is not {}: expected {} {}", item_, kRegimeGrammar,
               wanted, rest_.empty() ? std::string("at its end") : fmt::format("at '{}'", rest_));
  }

  std::string_view item_;
  std::string_view rest_;
};

// A CTA tile of whole warps, each a whole number of 16 x 16 MMA tiles, in at most 1024
// threads (the fields are bounded by now, so threads() cannot overflow).
void check_warp_tiling(std::string_view item, const TileConfig& t) {
  SPARK_CHECK(t.wm % 16 == 0 && t.wn % 16 == 0 && t.bm % t.wm == 0 && t.bn % t.wn == 0,
              SPARK_ERROR_INVALID_ARGUMENT,
              "SPARK_REGIMES: '{}': the warp tile WMxWN = {}x{} must be multiples of 16 that divide the CTA tile "
              "BMxBN = {}x{}",
              item, t.wm, t.wn, t.bm, t.bn);
  SPARK_CHECK(t.threads() <= 1024, SPARK_ERROR_INVALID_ARGUMENT,
              "SPARK_REGIMES: '{}': the tile needs {} threads, more than a CTA's 1024", item, t.threads());
}

// BMxBNxWMxWNxKSPLIT[xSTAGES][:kKCHUNKxRING][:flat]
TileConfig read_per_tile(ItemReader& r) {
  TileConfig t;
  t.stages = 0;  // the schedule's default
  t.bm = r.number("BM", 16, kMaxTileRows);
  r.expect("x");
  t.bn = r.number("BN", 32, 128);
  r.expect("x");
  t.wm = r.number("WM", 16, kMaxTileRows);
  r.expect("x");
  t.wn = r.number("WN", 16, 128);
  r.expect("x");
  t.ksplit = r.number("KSPLIT", 1, 4);
  if (r.take("x")) t.stages = r.number("STAGES", 0, 2);
  // ":kKCHUNKxRING" brings the weights in K chunks (bf16: through RING slots; tile_config()
  // uses no more slots than K has chunks).
  if (r.take(":k")) {
    t.kchunk = r.number("KCHUNK", 16, 64);
    r.expect("x");
    t.ring = r.number("RING", 1, kMaxRing);
  }
  // ... and a final ":flat" copies bf16 weights by a flat index loop.
  if (r.take(":flat")) t.flat_copies = true;
  r.expect_end();
  const std::string_view item = r.item();
  SPARK_CHECK(t.bn == 32 || t.bn == 64 || t.bn == 128, SPARK_ERROR_INVALID_ARGUMENT,
              "SPARK_REGIMES: '{}': BN must be 32, 64 or 128 (got {})", item, t.bn);
  SPARK_CHECK(t.ksplit == 1 || t.ksplit == 2 || t.ksplit == 4, SPARK_ERROR_INVALID_ARGUMENT,
              "SPARK_REGIMES: '{}': KSPLIT must be 1, 2 or 4, so that K = 128 and 192 split into 16-row steps (got {})",
              item, t.ksplit);
  SPARK_CHECK(t.kchunk == 0 || (t.kchunk % (16 * t.ksplit) == 0 && 64 % t.kchunk == 0 && t.stages <= 1),
              SPARK_ERROR_INVALID_ARGUMENT,
              "SPARK_REGIMES: '{}': a K chunk must be 16, 32 or 64 rows of whole split K steps (16 x KSPLIT), with "
              "one stage",
              item);
  check_warp_tiling(item, t);
  return t;
}

// ws:BMxBNxWMxWNxSTAGES
TileConfig read_stationary(ItemReader& r) {
  TileConfig t;
  t.stationary = true;
  t.bm = r.number("BM", 16, kMaxTileRows);
  r.expect("x");
  t.bn = r.number("BN", 128, 512);
  r.expect("x");
  t.wm = r.number("WM", 16, kMaxTileRows);
  r.expect("x");
  t.wn = r.number("WN", 16, 512);
  r.expect("x");
  t.stages = r.number("STAGES", 2, 4);
  r.expect_end();
  SPARK_CHECK(t.bn == 128 || t.bn == 256 || t.bn == 512, SPARK_ERROR_INVALID_ARGUMENT,
              "SPARK_REGIMES: '{}': a weight-stationary tile needs BN 128, 256 or 512 (whole scale words dividing "
              "N = 512; got {})",
              r.item(), t.bn);
  check_warp_tiling(r.item(), t);
  return t;
}

// wg:BNxGROUPSxSTAGES[xNSPLIT]
TileConfig read_wgmma(ItemReader& r) {
  const int bn = r.number("BN", 128, 256);
  r.expect("x");
  const int groups = r.number("GROUPS", 1, 3);
  r.expect("x");
  const int stages = r.number("STAGES", 2, 4);
  const int nsplit = r.take("x") ? r.number("NSPLIT", 1, 2) : 1;
  r.expect_end();
  SPARK_CHECK((bn == 128 || bn == 256) && (nsplit == 1 || bn == 256) && groups * nsplit <= 4,
              SPARK_ERROR_INVALID_ARGUMENT,
              "SPARK_REGIMES: '{}': a wgmma tile needs BN 128 or 256, 1..3 groups, 2..4 stages, NSPLIT 1 (or 2 at "
              "BN 256) and at most 4 warp groups in all",
              r.item());
  return wgmma_stationary(bn, groups, stages, nsplit);
}

// LO-HI:<tile>, LO being expected_min.
RegimeEntry read_item(std::string_view item, int expected_min) {
  ItemReader r(item);
  RegimeEntry e;
  e.regime.m_min = r.number("LO", 1, kMaxRegimeM);
  r.expect("-");
  e.regime.m_max = r.number("HI", 1, kMaxRegimeM);
  r.expect(":");
  SPARK_CHECK(e.regime.m_min == expected_min, SPARK_ERROR_INVALID_ARGUMENT,
              "SPARK_REGIMES: regime '{}' must start at M = {}", item, expected_min);
  SPARK_CHECK(e.regime.m_max >= e.regime.m_min, SPARK_ERROR_INVALID_ARGUMENT,
              "SPARK_REGIMES: regime '{}' is empty: HI {} is below LO {}", item, e.regime.m_max, e.regime.m_min);
  if (r.take("wg:"))
    e.tile = read_wgmma(r);
  else if (r.take("ws:"))
    e.tile = read_stationary(r);
  else
    e.tile = read_per_tile(r);
  return e;
}

}  // namespace

std::vector<RegimeEntry> parse_regime_table(std::string_view text) {
  std::vector<RegimeEntry> table;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    const std::string_view item = text.substr(start, comma == std::string_view::npos ? comma : comma - start);
    SPARK_CHECK(!item.empty(), SPARK_ERROR_INVALID_ARGUMENT, "SPARK_REGIMES: item {} of '{}' is empty",
                table.size() + 1, text);
    SPARK_CHECK(table.empty() || table.back().regime.m_max < kMaxRegimeM, SPARK_ERROR_INVALID_ARGUMENT,
                "SPARK_REGIMES: '{}' comes after the regime that ends at M = {}", item, kMaxRegimeM);
    table.push_back(read_item(item, table.empty() ? 1 : table.back().regime.m_max + 1));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  SPARK_CHECK(table.back().regime.m_max == kMaxRegimeM, SPARK_ERROR_INVALID_ARGUMENT,
              "SPARK_REGIMES: the regimes must end at M = {}", kMaxRegimeM);
  return table;
}

namespace {

// The SPARK_REGIMES tuning override, read once; it changes the rendered source, so cache
// entries of different tables never mix.
const std::optional<std::vector<RegimeEntry>>& regime_override() {
  static const std::optional<std::vector<RegimeEntry>> table = []() -> std::optional<std::vector<RegimeEntry>> {
    if (auto text = env_string("SPARK_REGIMES")) return parse_regime_table(*text);
    return std::nullopt;
  }();
  return table;
}

}  // namespace

namespace {

// Targets with room for a weight-stationary CTA (>= 200 KB of shared memory per block).
bool has_room_for_stationary(const ArchInfo& arch) { return arch.max_smem_per_block >= 200 * 1024; }

// The one target with warp-group MMAs (wgmma is sm_90a only).
bool has_wgmma(const ArchInfo& arch) { return arch.name == "sm_90a"; }

TileConfig stationary(int bm, int bn, int wm, int wn, int stages) {
  TileConfig t{bm, bn, wm, wn, 1, stages};
  t.stationary = true;
  return t;
}

}  // namespace

std::vector<RegimeEntry> regime_table(std::string_view arch) {
  const ArchInfo& info = arch_info(arch);
  if (const auto& table = regime_override()) return *table;
  // Decode (M <= 16): one 16-row MMA tile, narrow N tiles so even H = 8 spreads over
  // 128 CTAs, K split over two warp groups to halve the serial MMA chain.  tile_config()
  // widens some of these per head count (measured: bench/NOTES.md).
  if (has_wgmma(info)) {
    // From M = 33 a CTA keeps its weights in shared memory and streams q tiles past them,
    // on two warp groups of 64 x BN wgmma tiles (templates/mla_qproj_wg.cuh): BN = 128 up
    // to M = 128, 256 beyond.  tile_config() picks per head count and weight format,
    // mma.sync tiles included (sm90a_tile).  Three regimes from M = 129, as narrower or
    // one-group tiles win at M = 256-512 for some head counts and lose beyond.
    return {
        {{1, 16}, TileConfig{16, 32, 16, 16, 2, 0}},
        {{17, 32}, TileConfig{16, 64, 16, 16, 2, 0}},
        {{33, 64}, wgmma_stationary(128, 2, 2)},
        {{65, 128}, wgmma_stationary(128, 2, 3)},
        {{129, 256}, wgmma_stationary(256, 2, 2)},
        {{257, 512}, wgmma_stationary(256, 2, 2)},
        {{513, 8192}, wgmma_stationary(256, 2, 2)},
    };
  }
  if (has_room_for_stationary(info)) {
    // From M = 33 a CTA keeps its weights in shared memory and streams q tiles past them
    // (templates/mla_qproj_ws.cuh): 32 x 128 tiles up to M = 128, 64 x 256 beyond.
    return {
        {{1, 16}, TileConfig{16, 32, 16, 16, 2, 0}},
        {{17, 32}, TileConfig{16, 64, 16, 16, 2, 0}},
        {{33, 128}, stationary(32, 128, 16, 32, 3)},
        {{129, 8192}, stationary(64, 256, 32, 64, 3)},
    };
  }
  // Mid (17..128): 32-row tiles.  Large: 128 x 64 tiles, 8 warps.
  return {
      {{1, 16}, TileConfig{16, 32, 16, 16, 2, 0}},
      {{17, 128}, TileConfig{32, 64, 16, 32, 1, 0}},
      {{129, 8192}, TileConfig{128, 64, 32, 32, 1, 0}},
  };
}

RegimeEntry regime_for_m(std::string_view arch, int m) {
  for (const RegimeEntry& e : regime_table(arch))
    if (e.regime.contains(m)) return e;
  SPARK_FAIL(SPARK_ERROR_INVALID_ARGUMENT, "argument 'm': {} is outside 1..8192", m);
}

std::vector<RegimeEntry> regimes_up_to(std::string_view arch, int max_m) {
  std::vector<RegimeEntry> out;
  for (const RegimeEntry& e : regime_table(arch))
    if (e.regime.m_min <= max_m) out.push_back(e);
  return out;
}

namespace {

// A per-tile kernel tile (its stages are filled in by tile_config()); with a K chunk, the
// weights come in chunks of that many rows through `ring` slots (0: every chunk its own).
TileConfig per_tile(int bm, int bn, int wm, int wn, int ksplit, int kchunk = 0, int ring = 0) {
  TileConfig t{bm, bn, wm, wn, ksplit, 0};
  t.kchunk = kchunk;
  t.ring = ring;
  return t;
}

// sm_90a, the tile of each regime (bench/NOTES.md v4 to v7 have the sweeps).  bf16 decode:
// 16 x 64 tiles, 16 x 128 at K = 192 from 16 heads (fewer q re-reads); at 128 heads those
// stream their weights through two ring slots so the 512 tiles run in one wave, and at 64
// heads and K = 128 one warp per 32 columns takes all of K in four chunks.  MXFP8 decode:
// narrow tiles with K split four ways at few heads (more CTAs share the register
// dequantisation), 16 x 128 from 32 heads, four warps without a K split, the weights in
// 64-row chunks (v10: up to 18 % faster than 16 x 64 tiles or a K split over eight warps).
// A K chunk (`per_tile`'s sixth argument) lets the warps start on the first rows of the
// weights while the rest land.
std::optional<TileConfig> sm90a_tile(const KernelKey& key) {
  const int m_min = key.regime.m_min;
  const bool mx = key.weights == WeightFormat::kMxfp8;
  const int h = key.heads;
  const bool k192 = key.k == 192;
  const bool e4m3 = key.out == OutDtype::kE4m3;
  if (m_min == 1) {
    if (mx) {
      if (h < 32) return k192 ? per_tile(16, 32, 16, 32, 4, 64) : per_tile(16, 32, 16, 32, 4);
      return per_tile(16, 128, 16, 32, 1, 64);
    }
    if (k192 && h >= 16) return h > 64 ? per_tile(16, 128, 16, 32, 2, 64, 2) : per_tile(16, 128, 16, 32, 2);
    if (k192) return per_tile(16, 64, 16, 32, 2, 64);
    if (h > 64) return per_tile(16, 128, 16, 32, 2, 32, 2);
    if (h == 64) {
      // The flat copy loop: 6-8 % faster here with PDL, 3-7 % slower without (v12 sweeps
      // D, F and the 085367c grid); 3-6 % slower at 8-16 heads, and at 128 heads its
      // registers cost a CTA per SM.
      TileConfig t = per_tile(16, 128, 16, 32, 1, 32);
      t.flat_copies = true;
      return t;
    }
    return per_tile(16, 64, 16, 32, 2);
  }
  if (m_min == 17) {
    // Per-tile below 16 heads and from 64 (where the stationary CTAs, 2 per SM, would
    // take two waves); MXFP8 per-tile at every head count.  From 64 heads 32 x 128 tiles
    // whose weights stream through two 64-row ring slots (MXFP8: 64-row chunks), four
    // warps of 32 x 32 each; at 64 heads with bf16 weights K split two ways at K = 192 and
    // eight 16 x 32 warps at K = 128.  MXFP8 takes the four-warp tile from 32 heads (v10:
    // 10-21 % faster at 32 heads and at 128 heads with K = 128 than the stationary and
    // eight-warp tiles it replaced).  The rest, bf16 at 16..63 heads, keeps stationary
    // 32 x 128 tiles.
    if (h < 16) return mx ? per_tile(16, 32, 16, 32, 4, 64) : per_tile(32, 64, 16, 32, 2, k192 ? 64 : 0);
    if (h == 16 && !mx && k192) return per_tile(32, 64, 16, 32, 2, 64);
    if (h == 64 && !mx)
      return k192 ? per_tile(32, 128, 32, 32, 2, 64, 2) : per_tile(32, 128, 16, 32, 1, 64, 2);
    if (h >= 64 || (mx && h >= 32)) return per_tile(32, 128, 32, 32, 1, 64, 2);
    if (h < 32 && mx) return per_tile(32, 64, 16, 32, 2);
    return stationary(32, 128, 16, 32, 3);
  }
  if (m_min == 33 || m_min == 65) {
    // 64 x 128 wgmma tiles below 64 heads: twice the CTAs, and for MXFP8 each dequantises
    // half the columns.  From 64 heads (v8 sweep Y):
    // at K = 192 one warp group of 64 x 128 per CTA (101 KB, two CTAs per SM); at K = 128
    // with bf16 weights one group per CTA too (64 x 256 at 128 heads: 106 KB, the 256 CTAs
    // in one wave), with MXFP8 64 x 256 tiles on two groups (their dequantisation wants
    // the threads), except 64 x 128 on one group at 128 heads and M <= 64 and on two
    // groups for e4m3 output.
    // MXFP8 per-tile tiles where they beat the wgmma kernel: at M = 33-64 (each CTA
    // dequantising only its own columns) 32 x 64 tiles at 8 heads and 32 x 128 tiles on
    // four warps with 64-row chunks at 9-31 heads (v12 sweep MA: 9-17 % faster than eight
    // 16 x 32 warps at 8-16 heads, with PDL and without), and
    // 64 x 128 tiles with 64-row weight chunks (v11 sweep Q) on eight 32 x 32 warps at
    // 32-63 heads (1-11 % faster than the two wgmma groups), on four 64 x 32 warps at 128
    // heads, K = 192 (4-12 %) and at 64 heads, K = 128, bf16 output (9 %); at M = 65-128
    // (sweep R) four 32 x 32 warps at 8 heads (7-14 % with PDL, and faster than the staged
    // path without it), and eight for e4m3 output at 9-16 heads (2-11 %).
    if (mx && m_min == 33) {
      if (h <= 8) return per_tile(32, 64, 16, 32, 2);
      if (h < 32) return per_tile(32, 128, 32, 32, 1, 64);
      if (h < 64) return per_tile(64, 128, 32, 32, 1, 64);
      if ((h > 64 && k192) || (h == 64 && !k192 && !e4m3)) return per_tile(64, 128, 64, 32, 1, 64);
    }
    if (mx && m_min == 65) {
      if (h <= 8) return per_tile(32, 128, 32, 32, 1, 64);
      if (h <= 16 && e4m3) return per_tile(64, 128, 32, 32, 1, 64);
    }
    if (h >= 64) {
      if (k192) return wgmma_stationary(128, 1, 2);
      if (!mx) return h > 64 ? wgmma_stationary(256, 1, 2) : wgmma_stationary(128, 1, 2);
      if (h > 64 && m_min == 33) return wgmma_stationary(128, 1, 2);
      return e4m3 ? wgmma_stationary(128, 2, 2) : wgmma_stationary(256, 2, 2);
    }
    // bf16 weights up to 16 heads: one group per CTA (sweep Z: 1-7 % faster at M = 64-128).
    if (!mx && h <= 16) return wgmma_stationary(128, 1, 2);
    return wgmma_stationary(128, 2, m_min == 33 ? 2 : 3);
  }
  if (m_min >= 129) {
    // 64 x 256 wgmma tiles; 64 x 128 below 32 heads for MXFP8 (each CTA dequantising half
    // the columns) and up to 16 heads at K = 128 for bf16 (v7: faster at M = 256 and 1024;
    // at K = 192 and at 32 heads only at M = 256, slower at 1024).  v8 (sweeps X, Y): at
    // 128 heads, K = 128 and bf16 weights one group per CTA, two CTAs per SM (5-16 %
    // faster); at K = 128 from 64 heads 64 x 128 tiles for e4m3 output with MXFP8 weights,
    // and with bf16 weights at 64 heads (1-12 %); MXFP8 with e4m3 output at K = 192 and at
    // 32 heads splits each 64 x 256 tile over two warp groups (512 threads: the
    // dequantisation runs on twice the threads; 0-6 %).
    if (mx && h < 32) return wgmma_stationary(128, 2, 3);
    // v11 sweep S: up to M = 512, 64 x 128 tiles on two groups at 32-63 heads (8-19 %
    // faster than 64 x 256, 4-8 % slower at M = 1024); at M = 129-256 one 64 x 128 group
    // per CTA at K = 192 from 64 heads (2-7 %; at 64 heads with bf16 weights a tie).
    if (h >= 32 && h < 64 && m_min <= 257) return wgmma_stationary(128, 2, 2);
    if (m_min == 129 && k192 && (h > 64 || mx)) return wgmma_stationary(128, 1, 2);
    // bf16 up to 16 heads: at K = 192 one group per CTA (sweep Z: 2-16 % faster).
    if (!mx && h <= 16) return k192 ? wgmma_stationary(128, 1, 2) : wgmma_stationary(128, 2, 2);
    if (h >= 64 && !k192) {
      if (!mx && h > 64) return wgmma_stationary(256, 1, 2);
      if (e4m3 && (mx || h == 64)) return wgmma_stationary(128, 2, 2);
    }
    if (mx && e4m3 && (k192 || h < 64)) return wgmma_stationary(256, 2, 2, 2);
    return wgmma_stationary(256, 2, 2);
  }
  return std::nullopt;
}

// Per-shape refinements of the default table, each from a measured sweep (bench/NOTES.md).
TileConfig refine_for_shape(const KernelKey& key, size_t index, TileConfig tile) {
  if (regime_override()) return tile;  // an override is taken verbatim
  const ArchInfo& arch = arch_info(key.arch);
  if (has_wgmma(arch))
    if (auto t = sm90a_tile(key)) return *t;
  if (index == 0 && key.heads >= 32) {
    // Many heads already fill the machine: wider N tiles halve the q re-reads and CTAs.
    return TileConfig{16, 64, 16, 32, 2, 0};
  }
  if (has_room_for_stationary(arch)) {
    // Many heads: the stationary tiles pay from M = 17, and the wide ones from M = 33.
    if (index == 1 && key.heads >= 32) return stationary(32, 128, 16, 32, 3);
    if (index == 2 && key.heads >= 32) return stationary(64, 256, 32, 64, 3);
    return tile;
  }
  if (index == 1 && key.heads <= 16) {
    // Few heads: 16-row tiles with K split keep enough CTAs in flight at M = 17..128.
    return TileConfig{16, 64, 16, 16, 2, 0};
  }
  return tile;
}

}  // namespace

TileConfig tile_config(const KernelKey& key) {
  const auto table = regime_table(key.arch);
  for (size_t i = 0; i < table.size(); ++i)
    if (table[i].regime == key.regime) {
      TileConfig t = refine_for_shape(key, i, table[i].tile);
      if (t.stationary || t.kchunk >= key.k) t.kchunk = 0;  // the whole K at once
      // MXFP8 chunks keep their own rows of raw bytes: no ring.
      const int chunks = t.kchunk == 0 ? 1 : key.k / t.kchunk;
      t.ring = t.ring == 0 || key.weights == WeightFormat::kMxfp8 ? chunks : std::min(t.ring, chunks);
      if (!regime_override() && key.weights == WeightFormat::kMxfp8 && !t.stationary && t.wn % 32 != 0) {
        // MXFP8 warps convert whole 32-column scale groups: twice as wide, K split twice
        // as far, the same warps.
        t.wn *= 2;
        t.ksplit *= 2;
      }
      // One stage by default: a persistent double-buffered grid (stages = 2) was measured
      // slower everywhere (bench/NOTES.md, v1.3): twice the shared memory halves the CTAs
      // per SM and with them the bytes in flight, which is what this kernel lives on.
      if (t.stages == 0) t.stages = t.stationary ? 3 : 1;
      if (t.min_blocks < 0) {
        // A CTA alone on its SM (persistent or weight-stationary, 256+ threads) may use all
        // the registers rather than spill.  A 256-thread per-tile CTA asks for room for two
        // per SM: left to itself ptxas held an sm_80 MXFP8 tile at 80 registers and spilled,
        // and gave the sm_90a 16-row tiles fewer registers than they run best with.
        const int threads = t.threads();
        t.min_blocks = threads >= 256 && (t.stages == 2 || t.stationary) ? 1 : threads == 256 ? 2 : 0;
      }
      return t;
    }
  SPARK_FAIL(SPARK_ERROR_UNSUPPORTED, "kernel key '{}': M regime {}-{} is not a regime of {}", key.name(),
             key.regime.m_min, key.regime.m_max, key.arch);
}

}  // namespace spark

#include "ops/mla_qproj/tiles.h"

#include <algorithm>
#include <optional>
#include <tuple>

#include "core/env.h"
#include "core/error.h"
#include "ops/common/regime_text.h"

namespace spark {

namespace {

// The terms the three families' shared memory is made of (each template's kSmemBytes says
// the same; the rendered source static_asserts they agree).
int out_bytes(OutDtype out) { return out == OutDtype::kBf16 ? 2 : 1; }
int round128(int bytes) { return (bytes + 127) / 128 * 128; }
// `rows` q rows of K bf16 elements, padded by 8 (conflict-free ldmatrix).
int q_tile_bytes(int rows, int k) { return rows * (k + 8) * 2; }
// An output tile of rows x cols staged for 16-byte row stores (padded by 16 bytes a row).
int staging_bytes(int rows, int cols, OutDtype out) { return rows * (cols * out_bytes(out) + 16); }
// FP8 weights as they land, before the stationary kernels dequantise them: e4m3 values
// (rows padded by 16 bytes) and one word of scale bytes per K row and 128 columns.
int stationary_raw_bytes(int k, int bn, WeightFormat weights) {
  return is_fp8(weights) ? k * (bn + 16) + k * (bn / 128) * 4 : 0;
}

}  // namespace

int TileConfig::stage_bytes(int k, OutDtype out, WeightFormat weights) const {
  // templates/mla_qproj.cuh, MlaQprojTileConfig::kSmemBytes: A, then bf16 weights (swizzled
  // without padding from BN = 64) or FP8 raw values, one word of scale bytes per K row
  // and the decoded multipliers (one per row and 32 columns).  The epilogue reuses it.
  const int b_rows = kchunk > 0 ? kchunk * ring : k;
  const int b = is_fp8(weights) ? k * (bn + 16) + k * 4 + k * (bn / 32) * 4
                                                : b_rows * (bn >= 64 ? bn : bn + 8) * 2;
  const int red = (ksplit - 1) * (bm / wm) * (bn / wn) * (wm / 16) * (wn / 8) * 4 * 32 * 4;
  return round128(std::max(q_tile_bytes(bm, k) + b, red + staging_bytes(bm, bn, out)));
}

namespace {

TileConfig wgmma_stationary(int bn, int groups, int stages, int nsplit = 1) {
  TileConfig t{64, bn, 64, bn, 1, stages};
  t.stationary = t.wgmma = true;
  t.groups = groups;
  t.nsplit = nsplit;
  return t;
}

// templates/mla_qproj_ws.cuh, MlaQprojWsConfig::kSmemBytes: the weights (bf16, padded by 8),
// then q stages each also holding a tile's RoPE rows and reused by its outputs.
int stationary_smem_bytes(const TileConfig& t, int k, OutDtype out, WeightFormat weights) {
  const int w = round128(k * (t.bn + 8) * 2);
  const int stage = round128(std::max(q_tile_bytes(t.bm, k) + t.bm * (64 + 8) * 2, staging_bytes(t.bm, t.bn, out)));
  return w + stage + std::max((t.stages - 1) * stage, stationary_raw_bytes(k, t.bn, weights));
}

// templates/mla_qproj_wg.cuh, MlaQprojWgConfig::kSmemBytes: the weights in 128-byte
// swizzled rows, q stages per group, per-warp output staging, 1 KB of alignment slack.
int wgmma_smem_bytes(const TileConfig& t, int k, OutDtype out, WeightFormat weights) {
  const int w = t.bn / 64 * k * 128;
  const int stage = 64 * k * 2;
  const int stage_cols = t.nsplit > 1 && out == OutDtype::kBf16 && k > 128 ? 32 : 64;
  const int staging = staging_bytes(t.groups * t.nsplit * 4 * 16, stage_cols, out);
  const int raw = stationary_raw_bytes(k, t.bn, weights);
  return std::max(w + t.groups * t.stages * stage + staging, w + t.groups * stage + raw) + 1024;
}

}  // namespace

int TileConfig::smem_bytes(int k, OutDtype out, WeightFormat weights) const {
  // templates/mla_qproj_rs.cuh, MlaQprojRsConfig::kSmemBytes: the q tile, whose bytes the
  // warps' partial sums take afterwards.
  if (streamed) return round128(std::max(q_tile_bytes(bm, k), ksplit * bm * bn * 4));
  if (wgmma) return wgmma_smem_bytes(*this, k, out, weights);
  if (stationary) return stationary_smem_bytes(*this, k, out, weights);
  return stage_bytes(k, out, weights);  // one stage
}

std::string TileConfig::describe() const {
  if (streamed) return fmt::format("register-streamed BN={} KSPLIT={} threads={}", bn, ksplit, threads());
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

// Bounds that keep every size computed from a tile far inside int.  No CTA holds more than
// 1024 q rows in shared memory at K >= 128 (232448 bytes on the largest arch), and ring
// slots beyond K's chunk count are never used.
constexpr int kMaxTileRows = 1024;
constexpr int kMaxRing = 1024;

constexpr std::string_view kRegimeGrammar =
    "LO-HI:BMxBNxWMxWNxKSPLIT[xSTAGES][:kKCHUNKxRING][:flat] (e.g. 1-16:16x32x16x16x2 or 1-32:16x128x16x32x2:k64x2), "
    "LO-HI:ws:BMxBNxWMxWNxSTAGES (e.g. 129-8192:ws:64x256x32x64x2), LO-HI:wg:BNxGROUPSxSTAGES[xNSPLIT] (e.g. "
    "129-8192:wg:256x2x2) or LO-HI:rs:BNxKSPLIT (FP8 weights; e.g. 1-16:rs:128x4)";

// A reader of one item of SPARK_REGIMES, or of a tiles.table cell (`where` names the line).
ItemReader reader(std::string_view item, std::string where = "SPARK_REGIMES") {
  return ItemReader(item, std::move(where), kRegimeGrammar);
}

// A CTA tile of whole warps, each a whole number of 16 x 16 MMA tiles, in at most 1024
// threads (the fields are bounded by now, so threads() cannot overflow).
void check_warp_tiling(std::string_view item, const TileConfig& t) {
  SPARK_CHECK(t.wm % 16 == 0 && t.wn % 16 == 0 && t.bm % t.wm == 0 && t.bn % t.wn == 0,
              SPARK_ERROR_INVALID_ARGUMENT,
              "{}: the warp tile WMxWN = {}x{} must be multiples of 16 that divide the CTA tile "
              "BMxBN = {}x{}",
              item, t.wm, t.wn, t.bm, t.bn);
  SPARK_CHECK(t.threads() <= 1024, SPARK_ERROR_INVALID_ARGUMENT,
              "{}: the tile needs {} threads, more than a CTA's 1024", item, t.threads());
}

// BMxBNxWMxWNxKSPLIT[xSTAGES][:kKCHUNKxRING][:flat]
TileConfig read_per_tile(ItemReader& r) {
  TileConfig t;
  t.bm = r.number("BM", 16, kMaxTileRows);
  r.expect("x");
  t.bn = r.number("BN", 32, 128);
  r.expect("x");
  t.wm = r.number("WM", 16, kMaxTileRows);
  r.expect("x");
  t.wn = r.number("WN", 16, 128);
  r.expect("x");
  t.ksplit = r.number("KSPLIT", 1, 4);
  // One stage: "x1" may still be written; the persistent two-stage grid is gone (v1.3
  // measured it slower everywhere).
  if (r.take("x")) r.number("STAGES (a per-tile kernel has one)", 1, 1);
  // ":kKCHUNK[xRING]" brings the weights in K chunks, through RING slots (bf16; tile_config()
  // uses no more slots than K has chunks) or, without xRING, a slot per chunk (kRingPerChunk).
  if (r.take(":k")) {
    t.kchunk = r.number("KCHUNK", 16, 64);
    t.ring = r.take("x") ? r.number("RING", 1, kMaxRing) : kRingPerChunk;
  }
  // ... and a final ":flat" copies bf16 weights by a flat index loop.
  if (r.take(":flat")) t.flat_copies = true;
  r.expect_end();
  const std::string item = r.item();
  SPARK_CHECK(t.bn == 32 || t.bn == 64 || t.bn == 128, SPARK_ERROR_INVALID_ARGUMENT,
              "{}: BN must be 32, 64 or 128 (got {})", item, t.bn);
  SPARK_CHECK(t.ksplit == 1 || t.ksplit == 2 || t.ksplit == 4, SPARK_ERROR_INVALID_ARGUMENT,
              "{}: KSPLIT must be 1, 2 or 4, so that K = 128 and 192 split into 16-row steps (got {})",
              item, t.ksplit);
  SPARK_CHECK(t.kchunk == 0 || (t.kchunk % (16 * t.ksplit) == 0 && 64 % t.kchunk == 0), SPARK_ERROR_INVALID_ARGUMENT,
              "{}: a K chunk must be 16, 32 or 64 rows of whole split K steps (16 x KSPLIT)", item);
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
              "{}: a weight-stationary tile needs BN 128, 256 or 512 (whole scale words dividing "
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
              "{}: a wgmma tile needs BN 128 or 256, 1..3 groups, 2..4 stages, NSPLIT 1 (or 2 at "
              "BN 256) and at most 4 warp groups in all",
              r.item());
  return wgmma_stationary(bn, groups, stages, nsplit);
}

// rs:BNxKSPLIT
TileConfig read_streamed(ItemReader& r) {
  TileConfig t;
  t.streamed = true;
  t.bm = t.wm = 16;
  t.bn = t.wn = r.number("BN", 64, 128);
  r.expect("x");
  t.ksplit = r.number("KSPLIT", 1, 4);
  r.expect_end();
  SPARK_CHECK((t.bn == 64 || t.bn == 128) && (t.ksplit == 1 || t.ksplit == 2 || t.ksplit == 4),
              SPARK_ERROR_INVALID_ARGUMENT,
              "{}: a register-streamed tile needs BN 64 or 128 and KSPLIT 1, 2 or 4 (got {}x{})", r.item(), t.bn,
              t.ksplit);
  return t;
}

// wg:..., ws:..., rs:... or a per-tile tile.
TileConfig read_tile(ItemReader& r) {
  if (r.take("rs:")) return read_streamed(r);
  if (r.take("wg:")) return read_wgmma(r);
  if (r.take("ws:")) return read_stationary(r);
  return read_per_tile(r);
}

}  // namespace

std::vector<RegimeEntry> parse_regime_table(std::string_view text) {
  return read_regime_table<RegimeEntry>(text, "SPARK_REGIMES", kRegimeGrammar, kMaxM, read_tile);
}

namespace {

// Splits a line at runs of spaces and tabs.
std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

std::vector<std::string> split_commas(std::string_view text) {
  std::vector<std::string> out;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    out.emplace_back(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

// "LO-HI" with both in lo..hi, or "*" (the whole of lo..hi).
std::pair<int, int> read_range(std::string_view text, int lo, int hi, std::string_view what, const std::string& where) {
  if (text == "*") return {lo, hi};
  ItemReader r = reader(text, where);
  const int a = r.number(what, lo, hi);
  const int b = r.take("-") ? r.number(what, lo, hi) : a;
  r.expect_end();
  SPARK_CHECK(a <= b, SPARK_ERROR_INVALID_ARGUMENT, "{}: the {} range '{}' is empty", where, what, text);
  return {a, b};
}

bool is_target(std::string_view arch) {
  const auto& all = supported_archs();
  return std::any_of(all.begin(), all.end(), [&](const ArchInfo& a) { return a.name == arch; });
}

// Every arch a table row may name must be one spark targets, and each arch's rows must
// split 1..kMaxM into regimes: distinct M ranges that do not overlap and leave no gap.
void check_regimes(const TileTable& table) {
  for (const ArchInfo& a : supported_archs()) {
    const std::vector<MRegime> regimes = table_regimes(table, a.name);
    SPARK_CHECK(!regimes.empty() && regimes.front().m_min == 1 && regimes.back().m_max == kMaxM,
                SPARK_ERROR_INVALID_ARGUMENT, "{}: the rows for {} must cover M = 1..{}", table.origin, a.name, kMaxM);
    for (size_t i = 1; i < regimes.size(); ++i)
      SPARK_CHECK(regimes[i].m_min == regimes[i - 1].m_max + 1, SPARK_ERROR_INVALID_ARGUMENT,
                  "{}: the M ranges for {} overlap or leave a gap ({}-{} and {}-{}): each arch's ranges are its "
                  "regimes",
                  table.origin, a.name, regimes[i - 1].m_min, regimes[i - 1].m_max, regimes[i].m_min,
                  regimes[i].m_max);
  }
}

}  // namespace

bool TileRow::matches(const KernelKey& key) const {
  return (archs.empty() || std::find(archs.begin(), archs.end(), key.arch) != archs.end()) && m == key.regime &&
         key.heads >= heads_min && key.heads <= heads_max && (k == 0 || k == key.k) &&
         (weights.empty() || std::find(weights.begin(), weights.end(), key.weights) != weights.end()) && (!out || *out == key.out);
}

TileTable parse_tile_table(std::string_view text, std::string_view origin) {
  TileTable table;
  table.origin = std::string(origin);
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  int line_no = 0;
  for (size_t start = 0; start <= text.size();) {
    const size_t nl = text.find('\n', start);
    std::string_view line = text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    start = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    const std::string where = fmt::format("{} line {}", origin, line_no);
    std::string_view evidence;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) {
      evidence = line.substr(hash + 1);
      while (!evidence.empty() && evidence.front() == ' ') evidence.remove_prefix(1);
      line = line.substr(0, hash);
    }
    const std::vector<std::string_view> w = words(line);
    if (w.empty()) continue;
    if (w[0] == "group") {
      SPARK_CHECK(w.size() == 4 && w[2] == "=", SPARK_ERROR_INVALID_ARGUMENT,
                  "{}: expected 'group NAME = arch,arch,...'", where);
      std::vector<std::string> archs = split_commas(w[3]);
      for (const std::string& a : archs)
        SPARK_CHECK(is_target(a), SPARK_ERROR_INVALID_ARGUMENT, "{}: '{}' is not an arch spark targets ({})", where,
                    a, supported_arch_names());
      groups.emplace_back(std::string(w[1]), std::move(archs));
      continue;
    }
    SPARK_CHECK(w.size() == 7, SPARK_ERROR_INVALID_ARGUMENT,
                "{}: expected 7 columns (archs, M, heads, K, weights, output, tile), got {}", where, w.size());
    TileRow row;
    row.line = line_no;
    row.evidence = std::string(evidence);
    if (w[0] != "*") {
      const auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == w[0]; });
      if (group != groups.end()) {
        row.archs = group->second;
      } else {
        row.archs = split_commas(w[0]);
        for (const std::string& a : row.archs)
          SPARK_CHECK(is_target(a), SPARK_ERROR_INVALID_ARGUMENT,
                      "{}: '{}' is neither a group nor an arch spark targets ({})", where, a, supported_arch_names());
      }
    }
    const auto [m_min, m_max] = read_range(w[1], 1, kMaxM, "M", where);
    row.m = {m_min, m_max};
    std::tie(row.heads_min, row.heads_max) = read_range(w[2], 1, kMaxHeads, "heads", where);
    SPARK_CHECK(w[3] == "*" || w[3] == "128" || w[3] == "192", SPARK_ERROR_INVALID_ARGUMENT,
                "{}: K '{}' is not 128, 192 or *", where, w[3]);
    row.k = w[3] == "*" ? 0 : w[3] == "128" ? 128 : 192;
    if (w[4] != "*")
      for (const std::string& f : split_commas(w[4])) row.weights.push_back(parse_weight_format(f));
    if (w[5] != "*") row.out = parse_out_dtype(w[5]);
    ItemReader r = reader(w[6], where);
    row.tile = read_tile(r);
    table.rows.push_back(std::move(row));
  }
  check_regimes(table);
  return table;
}

TileTable tile_table_from_regimes(const std::vector<RegimeEntry>& regimes) {
  TileTable table;
  table.origin = "SPARK_REGIMES";
  for (const RegimeEntry& e : regimes) {
    TileRow row;
    row.m = e.regime;
    row.tile = e.tile;
    table.rows.push_back(std::move(row));
  }
  return table;
}

const TileTable& builtin_tile_table() {
  static const TileTable table = parse_tile_table(embedded_tile_table(), "ops/mla_qproj/tiles.table");
  return table;
}

const TileTable& active_tile_table() {
  // Read once: the override changes the rendered sources, so cache entries of different
  // tables never mix.
  static const TileTable table = [] {
    if (auto text = env_string("SPARK_REGIMES")) return tile_table_from_regimes(parse_regime_table(*text));
    return builtin_tile_table();
  }();
  return table;
}

std::vector<MRegime> table_regimes(const TileTable& table, std::string_view arch) {
  std::vector<MRegime> regimes;
  for (const TileRow& row : table.rows)
    if ((row.archs.empty() || std::find(row.archs.begin(), row.archs.end(), arch) != row.archs.end()) &&
        std::find(regimes.begin(), regimes.end(), row.m) == regimes.end())
      regimes.push_back(row.m);
  std::sort(regimes.begin(), regimes.end(), [](const MRegime& a, const MRegime& b) { return a.m_min < b.m_min; });
  return regimes;
}

std::vector<RegimeEntry> regime_table(std::string_view arch) {
  arch_info(arch);  // UNSUPPORTED for a target spark does not have
  const TileTable& table = active_tile_table();
  std::vector<RegimeEntry> out;
  for (const MRegime& m : table_regimes(table, arch))
    for (const TileRow& row : table.rows)
      if (row.m == m && (row.archs.empty() || std::find(row.archs.begin(), row.archs.end(), arch) != row.archs.end())) {
        out.push_back({m, row.tile});
        break;
      }
  return out;
}

RegimeEntry regime_for_m(std::string_view arch, int m) {
  for (const RegimeEntry& e : regime_table(arch))
    if (e.regime.contains(m)) return e;
  SPARK_FAIL(SPARK_ERROR_INVALID_ARGUMENT, "argument 'm': {} is outside 1..{}", m, kMaxM);
}

std::vector<RegimeEntry> regimes_up_to(std::string_view arch, int max_m) {
  std::vector<RegimeEntry> out;
  for (const RegimeEntry& e : regime_table(arch))
    if (e.regime.m_min <= max_m) out.push_back(e);
  return out;
}

int min_blocks_for(const TileConfig& t) {
  // A weight-stationary CTA of 256+ threads is alone on its SM and may use every register
  // rather than spill.  A 256-thread per-tile CTA asks for room for two per SM: left to
  // itself ptxas held an sm_80 MXFP8 tile at 80 registers and spilled, and gave the sm_90a
  // 16-row tiles fewer registers than they run best with.  Otherwise ptxas decides.
  const int threads = t.threads();
  return threads >= 256 && t.stationary ? 1 : threads == 256 ? 2 : 0;
}

TileConfig tile_config(const KernelKey& key, const TileTable& table) {
  for (const TileRow& row : table.rows) {
    if (!row.matches(key)) continue;
    TileConfig t = row.tile;
    if (t.kchunk > 0) {
      // Ring slots: a slot per chunk where the row asks for it and always for FP8 (each
      // chunk keeps its own raw bytes), else at most the chunks K has.
      const int chunks = key.k / t.kchunk;
      t.ring = t.ring == kRingPerChunk || is_fp8(key.weights) ? chunks : std::min(t.ring, chunks);
    }
    t.min_blocks = min_blocks_for(t);
    return t;
  }
  SPARK_FAIL(SPARK_ERROR_UNSUPPORTED, "kernel key '{}': no row of {} serves it (M regime {}-{} on {})", key.name(),
             table.origin, key.regime.m_min, key.regime.m_max, key.arch);
}

TileConfig tile_config(const KernelKey& key) {
  arch_info(key.arch);  // UNSUPPORTED for a target spark does not have
  return tile_config(key, active_tile_table());
}

}  // namespace spark

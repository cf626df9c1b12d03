#include "ops/mla_oproj/render.h"

#include "core/env.h"
#include "core/error.h"
#include "jit/arch.h"
#include "ops/common/regime_text.h"

namespace spark::oproj {

namespace {

constexpr int kWgStages = 10;  // o stages in the stationary schedule's ring
constexpr int kL = 512;

}  // namespace

int Tile::smem_bytes(OutDtype out) const {
  if (!stationary) return ksplit * bm() * bn * 4;  // every warp row's partial sums
  // Weights (L / 64 blocks of 128 rows x 128 bytes), the o stages (64 rows x 128 bytes),
  // four warps' output staging (16 rows x (64 columns + 16 bytes)), and 1 KB to align.
  const int out_bytes = out == OutDtype::kBf16 ? 2 : 1;
  return kL / 64 * 128 * 128 + stages * 64 * 128 + 4 * 16 * (64 * out_bytes + 16) + 1024;
}

std::string Tile::describe() const {
  if (stationary)
    return fmt::format("weight-stationary wgmma, 64x{} tiles, {} o stages, {} threads", bn, stages, threads());
  return fmt::format("{}x{} CTA tile, {} warps along L, {} threads", bm(), bn, ksplit, threads());
}

namespace {

// Decode keeps one 16-row tile per warp.  Past it, two 16-row tiles per warp, so each weight
// fragment serves 32 rows; or on sm_90a, with the stationary schedule, each head's weights
// kept in shared memory across M tiles (wgmma).
const std::vector<MRegime> kBuiltinRegimes{{1, 16}, {17, kMaxM}};

constexpr std::string_view kOverrideGrammar =
    "LO-HI:BNxKSPLITxTM (tiled, e.g. 1-16:32x8x1) or LO-HI:wg:STAGES (weight-stationary wgmma on sm_90a, e.g. "
    "17-8192:wg:10)";

Tile stationary_tile(int stages) {
  Tile t;
  t.stationary = true;
  t.bn = 128;
  t.stages = stages;
  return t;
}

// The tiled tile for a key's heads and M range.  Few heads: 32-column CTAs (eight warps
// along L) so more CTAs share the weight read; many heads fill the machine with 64-column
// CTAs (four along L).
Tile builtin_tiled(const Key& key) {
  Tile t;
  const bool narrow = key.v == 128 ? key.heads < 32 : key.heads < 16;
  t.bn = narrow ? 32 : 64;
  t.ksplit = narrow ? 8 : 4;
  t.tm = key.regime.m_max <= 16 ? 1 : 2;
  return t;
}

// wg:STAGES or BNxKSPLITxTM, to the item's end.
Tile read_override_tile(ItemReader& r) {
  if (r.take("wg:")) {
    const int stages = r.number("STAGES", 3, 10);
    r.expect_end();
    return stationary_tile(stages);
  }
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
  return read_regime_table<RegimeTile>(text, "SPARK_OPROJ_TILES", kOverrideGrammar, kMaxM, read_override_tile);
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
  if (text == "tiled") return Schedule::kTiled;
  if (text == "stationary") return Schedule::kStationary;
  throw Error(SPARK_ERROR_INVALID_ARGUMENT,
              fmt::format("SPARK_OPROJ_SCHEDULE: '{}' is not a schedule (tiled or stationary)", text));
}

Schedule active_schedule() {
  // Read once: the choice changes the rendered sources, so cache entries never mix.
  static const Schedule schedule = [] {
    const auto text = env_string("SPARK_OPROJ_SCHEDULE");
    return text ? parse_schedule(*text) : Schedule::kTiled;
  }();
  return schedule;
}

Tile tile_for(const Key& key, const Tiling& tiling) {
  // The wgmma schedule needs sm_90a; elsewhere its regimes take the tiled tile.
  const bool wgmma = key.arch == "sm_90a";
  for (const RegimeTile& e : tiling.override_table)
    if (e.regime == key.regime) return e.tile.stationary && !wgmma ? builtin_tiled(key) : e.tile;
  if (tiling.past_decode == Schedule::kStationary && wgmma && key.regime.m_min > 16) return stationary_tile(kWgStages);
  return builtin_tiled(key);
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
  r.smem_bytes = r.tile.smem_bytes(key.out);
  SPARK_CHECK(r.smem_bytes <= arch.max_smem_per_block, SPARK_ERROR_UNSUPPORTED,
              "kernel key '{}': tile needs {} bytes of shared memory, {} allows {}", r.key, r.smem_bytes, key.arch,
              arch.max_smem_per_block);
  const char* out = key.out == OutDtype::kBf16 ? "spark::OutKind::kBf16" : "spark::OutKind::kE4m3";
  const char* weights = key.weights == WeightFormat::kBf16    ? "spark::WeightKind::kBf16"
                        : key.weights == WeightFormat::kMxfp8 ? "spark::WeightKind::kMxfp8"
                                                              : "spark::WeightKind::kFp8Block128";
  const Tile& t = r.tile;
  const std::string choices =
      t.stationary ? fmt::format("  static constexpr int kStages = {};\n", t.stages)
                   : fmt::format("  static constexpr int BN = {}, KSPLIT = {}, TM = {};\n", t.bn, t.ksplit, t.tm);
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
      "extern \"C\" __global__ void __launch_bounds__({threads}) {entry}(const spark::MlaOprojParams params) {{\n"
      "  spark::{driver}<Config>(params);\n"
      "}}\n",
      fmt::arg("key", r.key), fmt::arg("gen", kGeneratorVersion), fmt::arg("tile", r.summary),
      fmt::arg("smem", r.smem_bytes), fmt::arg("header", t.stationary ? "mla_oproj_wg.cuh" : "mla_oproj.cuh"),
      fmt::arg("v", key.v), fmt::arg("l", key.l), fmt::arg("choices", choices), fmt::arg("out", out),
      fmt::arg("weights", weights), fmt::arg("config", t.stationary ? "MlaOprojWgConfig" : "MlaOprojConfig"),
      fmt::arg("threads", r.threads), fmt::arg("entry", kKernelEntryName),
      fmt::arg("driver", t.stationary ? "mla_oproj_wg" : "mla_oproj"));
  return r;
}

}  // namespace spark::oproj

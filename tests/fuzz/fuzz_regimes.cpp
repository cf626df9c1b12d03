// The tuning overrides' parsers on any bytes: parse_regime_table (SPARK_REGIMES) and
// oproj::parse_tile_override (SPARK_OPROJ_TILES), each a clear INVALID_ARGUMENT naming its
// variable or a table of contiguous regimes over 1..8192 whose every tile gives sane sizes.  The sizes are
// computed in int by the library itself, which this build compiles with UBSan: a signed
// overflow in threads(), stage_bytes() or smem_bytes() aborts there (-fno-sanitize-recover).

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "ops/mla_oproj/render.h"
#include "ops/mla_qproj/tiles.h"

namespace {

// Parses with `parse`; false after an INVALID_ARGUMENT whose message starts with `variable`.
template <class Parse>
bool parsed(Parse parse, std::string_view variable) {
  try {
    parse();
    return true;
  } catch (const spark::Error& e) {
    if (e.status() != SPARK_ERROR_INVALID_ARGUMENT) __builtin_trap();
    const std::string_view what = e.what();
    if (what.rfind(variable, 0) != 0 || what.substr(variable.size(), 2) != ": ") __builtin_trap();
    return false;
  }
}

// Regimes in order, each starting where the last ended, from 1 to 8192.
template <class Table>
void check_contiguous(const Table& table) {
  int next = 1;
  for (const auto& e : table) {
    if (e.regime.m_min != next || e.regime.m_max < e.regime.m_min) __builtin_trap();
    next = e.regime.m_max + 1;
  }
  if (next != 8193) __builtin_trap();
}

void check_oproj(std::string_view text) {
  std::vector<spark::oproj::RegimeTile> table;
  if (!parsed([&] { table = spark::oproj::parse_tile_override(text); }, "SPARK_OPROJ_TILES")) return;
  check_contiguous(table);
  for (const spark::oproj::RegimeTile& e : table) {
    const spark::oproj::Tile& t = e.tile;
    if (t.threads() < 32 || t.threads() > 512 || t.bm() < 16 || t.bm() > 64) __builtin_trap();
    if (t.ring && (e.regime.m_max > 32 || t.threads() > 256 || t.stages < 2 || t.stages > 4)) __builtin_trap();
    if (t.ring && t.tm != (e.regime.m_max > 16 ? 2 : 1)) __builtin_trap();
    if (t.pre && (e.regime.m_max > 16 || t.reg_chunks < 0 || t.reg_chunks > 512 / 32 / t.ksplit)) __builtin_trap();
    if (t.describe().empty()) __builtin_trap();
    // The tile a key of the regime gets (a ring, pre or wg tile that does not fit the arch falls
    // back to the built-in tiled one): a ring or pre tile within half an SM; on sm_90a every admitted
    // tile within the arch (on sm_86 a large tiled one is refused when rendered).
    const spark::oproj::Tiling tiling(table);
    for (const spark::WeightFormat w : {spark::WeightFormat::kBf16, spark::WeightFormat::kMxfp8})
      for (const spark::OutDtype out : {spark::OutDtype::kBf16, spark::OutDtype::kE4m3})
        for (const auto& [arch, per_block] : {std::pair{"sm_90a", 232448}, std::pair{"sm_86", 101376}}) {
          const auto key = spark::oproj::Key::of(8, 256, e.regime, w, out, arch);
          const spark::oproj::Tile u = spark::oproj::tile_for(key, tiling);
          const int smem = u.smem_bytes(key);
          if (smem <= 0 || (per_block == 232448 && smem > per_block)) __builtin_trap();
          if (u.ring && 2 * (smem + 1024) > per_block + 1024) __builtin_trap();
          // A pre-converted tile: FP8 weights only, two CTAs an SM.
          if (u.pre && (w == spark::WeightFormat::kBf16 || 2 * (smem + 1024) > per_block + 1024)) __builtin_trap();
          // A stationary launch's M chunks at the regime's ends: 1..tiles, none empty.
          if (!u.stationary) continue;
          for (const int m : {e.regime.m_min, e.regime.m_max}) {
            const long long tiles = (m + u.bm() - 1) / u.bm();
            const long long chunks = spark::oproj::stationary_chunks(u, w, 16, tiles, 132);
            if (chunks < 1 || chunks > tiles || (chunks - 1) * ((tiles + chunks - 1) / chunks) >= tiles)
              __builtin_trap();
          }
        }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_oproj(text);
  std::vector<spark::RegimeEntry> table;
  if (!parsed([&] { table = spark::parse_regime_table(text); }, "SPARK_REGIMES")) return 0;
  check_contiguous(table);
  for (const spark::RegimeEntry& e : table) {
    const spark::TileConfig& t = e.tile;
    const int threads = t.threads();
    if (threads < 32 || threads > 1024 || threads % 32 != 0) __builtin_trap();
    // A ring of kRingPerChunk (":kCHUNK" without "xRING") is fitted to K by tile_config.
    const bool per_chunk = t.kchunk > 0 && t.ring == spark::kRingPerChunk;
    if (t.ksplit < 1 || t.stages < 1 || (t.ring < 1 && !per_chunk) || t.kchunk < 0) __builtin_trap();
    for (const int k : {128, 192})
      for (const spark::OutDtype out : {spark::OutDtype::kBf16, spark::OutDtype::kE4m3})
        for (const spark::WeightFormat w : spark::kWeightFormats) {
          const int smem = t.smem_bytes(k, out, w);
          if (smem <= 0 || smem >= (1 << 28)) __builtin_trap();
          if (!t.stationary && t.stage_bytes(k, out, w) <= 0) __builtin_trap();
        }
    if (t.describe().empty()) __builtin_trap();
  }
  return 0;
}

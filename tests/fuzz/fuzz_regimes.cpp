// parse_regime_table (the SPARK_REGIMES override) on any bytes: a clear INVALID_ARGUMENT or a
// table of contiguous regimes over 1..8192 whose every tile gives sane sizes.  The sizes are
// computed in int by the library itself, which this build compiles with UBSan: a signed
// overflow in threads(), stage_bytes() or smem_bytes() aborts there (-fno-sanitize-recover).

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "ops/mla_qproj/tiles.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<spark::RegimeEntry> table;
  try {
    table = spark::parse_regime_table(text);
  } catch (const spark::Error& e) {
    if (e.status() != SPARK_ERROR_INVALID_ARGUMENT) __builtin_trap();
    if (std::string_view(e.what()).rfind("SPARK_REGIMES: ", 0) != 0) __builtin_trap();
    return 0;
  }
  int next = 1;
  for (const spark::RegimeEntry& e : table) {
    if (e.regime.m_min != next || e.regime.m_max < e.regime.m_min) __builtin_trap();
    next = e.regime.m_max + 1;
  }
  if (next != 8193) __builtin_trap();
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

// The tile table (ops/mla_qproj/tiles.table) and the SPARK_REGIMES override: the table parses,
// every row is reachable, every supported key finds a tile that fits, and the override's
// strict grammar (numbers range-checked before any arithmetic).
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "ops/mla_qproj/key.h"
#include "ops/mla_qproj/tiles.h"

using namespace spark;

namespace {
KernelKey sample() { return KernelKey::of(11, 192, {17, 128}, WeightFormat::kBf16, OutDtype::kE4m3, "sm_90a"); }
}  // namespace

namespace {

// Whether neighbouring regimes i - 1 and i of `arch` pick a different tile for some shape.
bool regimes_differ(std::string_view arch, const std::vector<RegimeEntry>& table, size_t i) {
  KernelKey key = sample();
  key.arch = std::string(arch);
  for (int h : {8, 11, 16, 32, 64, 128})
    for (int k : {128, 192})
      for (WeightFormat w : kWeightFormats)
        for (OutDtype o : {OutDtype::kBf16, OutDtype::kE4m3}) {
          key.heads = h;
          key.k = k;
          key.weights = w;
          key.out = o;
          key.regime = table[i - 1].regime;
          const std::string before = tile_config(key).describe();
          key.regime = table[i].regime;
          if (tile_config(key).describe() != before) return true;
        }
  return false;
}

}  // namespace

TEST_CASE("the M-regime table covers 1..8192, each boundary changing some shape's tile, on every arch") {
  for (const ArchInfo& a : supported_archs()) {
    const auto table = regime_table(a.name);
    REQUIRE(table.size() >= 3);
    CHECK(table.front().regime.m_min == 1);
    CHECK(table.back().regime.m_max == 8192);
    for (size_t i = 1; i < table.size(); ++i) {
      CHECK(table[i].regime.m_min == table[i - 1].regime.m_max + 1);
      CHECK_MESSAGE(regimes_differ(a.name, table, i), a.name, ": regimes ", table[i - 1].regime.m_max, " and ",
                    table[i].regime.m_min, " share every tile");
    }
    for (int m : {1, 2, 16, 17, 33, 64, 128, 129, 256, 257, 512, 513, 1000, 8192}) CHECK(regime_for_m(a.name, m).regime.contains(m));
    for (const RegimeEntry& e : table)
      for (OutDtype o : {OutDtype::kBf16, OutDtype::kE4m3})
        for (int k : {128, 192}) CHECK(e.tile.smem_bytes(k, o, WeightFormat::kMxfp8) <= a.max_smem_per_block);
    CHECK(regimes_up_to(a.name, 1).size() == 1);
    CHECK(regimes_up_to(a.name, 8192).size() == table.size());
  }
  CHECK_THROWS_AS(regime_for_m("sm_90a", 0), Error);
  CHECK_THROWS_AS(regime_for_m("sm_90a", 8193), Error);
  CHECK_THROWS_AS(arch_info("sm_70"), Error);
  CHECK(arch_for_compute_capability(90) == "sm_90a");
  CHECK(arch_for_compute_capability(80) == "sm_80");
}

TEST_CASE("a regime table override parses, and bad ones are refused") {
  const auto t = parse_regime_table("1-8:16x32x16x16x2,9-8192:64x64x32x32x1");
  REQUIRE(t.size() == 2);
  CHECK(t[0].regime == MRegime{1, 8});
  CHECK(t[1].tile.bm == 64);
  CHECK(t[1].tile.threads() == 128);
  CHECK_THROWS_AS(parse_regime_table("2-8192:16x32x16x16x1"), Error);         // must start at 1
  CHECK_THROWS_AS(parse_regime_table("1-100:16x32x16x16x1"), Error);          // must end at 8192
  CHECK_THROWS_AS(parse_regime_table("1-8192:16x48x16x16x1"), Error);         // 512 % 48
  CHECK_THROWS_AS(parse_regime_table("1-8192:16x32"), Error);
  CHECK_THROWS_AS(parse_regime_table("1-8192:16x32x16x16x1:junk"), Error);    // trailing text
  CHECK_THROWS_AS(parse_regime_table("1-8192:16x32x16x16x1x1y"), Error);
  // Weight-stationary items.
  const auto w = parse_regime_table("1-16:16x32x16x16x2,17-8192:ws:64x256x32x64x3");
  REQUIRE(w.size() == 2);
  CHECK_FALSE(w[0].tile.stationary);
  CHECK(w[1].tile.stationary);
  CHECK(w[1].tile.stages == 3);
  CHECK(w[1].tile.threads() == 256);
  CHECK(w[1].tile.describe().find("weight-stationary") != std::string::npos);
  CHECK_THROWS_AS(parse_regime_table("1-8192:ws:64x64x32x32x3"), Error);    // BN not a multiple of 128
  CHECK_THROWS_AS(parse_regime_table("1-8192:ws:64x256x32x64x5"), Error);   // 2..4 stages
  CHECK_THROWS_AS(parse_regime_table("1-8192:16x256x16x32x1"), Error);      // per-tile BN <= 128
  // Register-streamed items: rs:BNxKSPLIT, a 16 x BN tile of KSPLIT warps.
  const auto rs = parse_regime_table("1-16:rs:64x4,17-8192:rs:128x2");
  REQUIRE(rs.size() == 2);
  CHECK(rs[0].tile.streamed);
  CHECK(rs[0].tile.threads() == 128);
  CHECK(rs[1].tile.threads() == 64);
  CHECK(rs[1].tile.bn == 128);
  CHECK(rs[0].tile.smem_bytes(192, OutDtype::kBf16, WeightFormat::kMxfp8) == 4 * 16 * 64 * 4);  // the warps' sums
  CHECK(rs[1].tile.smem_bytes(192, OutDtype::kBf16, WeightFormat::kMxfp8) == 2 * 16 * 128 * 4);
  CHECK(parse_regime_table("1-8192:rs:64x1")[0].tile.smem_bytes(192, OutDtype::kE4m3, WeightFormat::kMxfp8) ==
        16 * 200 * 2);  // the q tile, larger than one warp's sums
  CHECK(rs[0].tile.describe().find("register-streamed") != std::string::npos);
  CHECK_THROWS_AS(parse_regime_table("1-8192:rs:32x4"), Error);    // BN 64 or 128
  CHECK_THROWS_AS(parse_regime_table("1-8192:rs:128x3"), Error);   // KSPLIT 1, 2 or 4
  CHECK_THROWS_AS(parse_regime_table("1-8192:rs:128x4x2"), Error);
  // Weight-stationary wgmma items: BNxGROUPSxSTAGES[xNSPLIT].
  const auto g = parse_regime_table("1-16:16x32x16x16x2,17-8192:wg:128x2x3");
  REQUIRE(g.size() == 2);
  CHECK(g[1].tile.wgmma);
  CHECK(g[1].tile.stationary);
  CHECK(g[1].tile.bm == 64);
  CHECK(g[1].tile.bn == 128);
  CHECK(g[1].tile.groups == 2);
  CHECK(g[1].tile.stages == 3);
  CHECK(g[1].tile.threads() == 256);
  CHECK(g[1].tile.describe().find("wgmma") != std::string::npos);
  CHECK_THROWS_AS(parse_regime_table("1-8192:wg:64x2x2"), Error);    // BN 128 or 256
  CHECK_THROWS_AS(parse_regime_table("1-8192:wg:256x4x2"), Error);   // 1..3 groups
  CHECK_THROWS_AS(parse_regime_table("1-8192:wg:256x2x1"), Error);   // 2..4 stages
  // ... with an optional fourth number: warp groups per team, splitting BN.
  const auto s = parse_regime_table("1-8192:wg:256x2x2x2");
  REQUIRE(s.size() == 1);
  CHECK(s[0].tile.nsplit == 2);
  CHECK(s[0].tile.groups == 2);
  CHECK(s[0].tile.threads() == 512);
  CHECK(s[0].tile.describe().find("NSPLIT=2") != std::string::npos);
  CHECK(parse_regime_table("1-8192:wg:256x2x2x1")[0].tile.nsplit == 1);
  CHECK_THROWS_AS(parse_regime_table("1-8192:wg:128x2x2x2"), Error);   // a group's MMAs 128 or 256 wide
  CHECK_THROWS_AS(parse_regime_table("1-8192:wg:256x3x2x2"), Error);   // at most 4 warp groups
  CHECK_THROWS_AS(parse_regime_table("1-8192:wg:256x2x2x2x"), Error);  // trailing text
  // Per-tile items streaming bf16 weights in K chunks through a ring: ":kKCHUNKxRING".
  const auto r = parse_regime_table("1-32:16x128x16x32x2:k64x2,33-8192:32x64x16x32x1:k16x3");
  REQUIRE(r.size() == 2);
  CHECK(r[0].tile.kchunk == 64);
  CHECK(r[0].tile.ring == 2);
  CHECK(r[1].tile.kchunk == 16);
  CHECK(r[1].tile.ring == 3);
  CHECK(r[0].tile.describe().find("KCHUNK=64 RING=2") != std::string::npos);
  // Half the weight rows in shared memory: 2 x 64 rows of 128 columns instead of 192 rows.
  CHECK(r[0].tile.smem_bytes(192, OutDtype::kBf16, WeightFormat::kBf16) ==
        16 * (192 + 8) * 2 + 2 * 64 * 128 * 2);
  CHECK_THROWS_AS(parse_regime_table("1-8192:16x128x16x32x2:k16x2"), Error);    // chunk < a split K step
  CHECK_THROWS_AS(parse_regime_table("1-8192:16x128x16x32x1:k48x2"), Error);    // 64 % 48
  CHECK_THROWS_AS(parse_regime_table("1-8192:16x128x16x32x1:k64x0"), Error);    // no slot
  CHECK_THROWS_AS(parse_regime_table("1-8192:16x128x16x32x1x2:k64x2"), Error);  // a second stage: gone
  CHECK(parse_regime_table("1-8192:16x128x16x32x1:k64")[0].tile.ring == kRingPerChunk);  // a slot per chunk
  // ... and bf16 weight copies by a flat index loop: ":flat", last.
  const auto f = parse_regime_table("1-16:16x128x16x32x1:k32x4:flat,17-8192:32x64x16x32x1:flat");
  REQUIRE(f.size() == 2);
  CHECK(f[0].tile.flat_copies);
  CHECK(f[0].tile.kchunk == 32);
  CHECK(f[1].tile.flat_copies);
  CHECK(f[1].tile.kchunk == 0);
  CHECK(f[0].tile.describe().find("COPIES=flat") != std::string::npos);
  CHECK_FALSE(r[0].tile.flat_copies);
  CHECK_THROWS_AS(parse_regime_table("1-8192:16x128x16x32x1:flat:k32x4"), Error);  // ":flat" goes last
  CHECK_THROWS_AS(parse_regime_table("1-8192:wg:256x2x2:flat"), Error);            // per-tile only
}

TEST_CASE("per-shape tiles differ where tuned") {
  const KernelKey few = KernelKey::of(8, 192, {1, 16}, WeightFormat::kBf16, OutDtype::kBf16, "sm_90a");
  KernelKey many = few;
  many.heads = 128;
  CHECK(tile_config(few).describe() != tile_config(many).describe());
}

// ==================================================================================
// SPARK_REGIMES: strict numbers, every field range-checked before any arithmetic
// ==================================================================================

namespace {

// The message parse_regime_table refuses `text` with (a failed check when it parses).
std::string regime_error(std::string_view text) {
  try {
    parse_regime_table(text);
  } catch (const Error& e) {
    CHECK(e.status() == SPARK_ERROR_INVALID_ARGUMENT);
    return e.what();
  }
  FAIL_CHECK("parsed: '" << std::string(text) << "'");
  return {};
}

// Every field of a tile, so two parses compare whole.
std::string fields(const TileConfig& t) {
  return fmt::format("bm={} bn={} wm={} wn={} ksplit={} stages={} stationary={} wgmma={} groups={} nsplit={} "
                     "kchunk={} ring={} flat={} min_blocks={}",
                     t.bm, t.bn, t.wm, t.wn, t.ksplit, t.stages, t.stationary, t.wgmma, t.groups, t.nsplit,
                     t.kchunk, t.ring, t.flat_copies, t.min_blocks);
}

// A built-in table written as the override that reproduces it.
std::string as_override(const std::vector<RegimeEntry>& table) {
  std::string text;
  for (const RegimeEntry& e : table) {
    const TileConfig& t = e.tile;
    std::string item = fmt::format("{}-{}:", e.regime.m_min, e.regime.m_max);
    if (t.wgmma)
      item += fmt::format("wg:{}x{}x{}{}", t.bn, t.groups, t.stages, t.nsplit > 1 ? fmt::format("x{}", t.nsplit) : "");
    else if (t.stationary)
      item += fmt::format("ws:{}x{}x{}x{}x{}", t.bm, t.bn, t.wm, t.wn, t.stages);
    else
      item += fmt::format("{}x{}x{}x{}x{}{}{}{}", t.bm, t.bn, t.wm, t.wn, t.ksplit,
                          t.stages ? fmt::format("x{}", t.stages) : "",
                          t.kchunk == 0                ? ""
                          : t.ring == kRingPerChunk ? fmt::format(":k{}", t.kchunk)
                                                    : fmt::format(":k{}x{}", t.kchunk, t.ring),
                          t.flat_copies ? ":flat" : "");
    text += (text.empty() ? "" : ",") + item;
  }
  return text;
}

}  // namespace

TEST_CASE("SPARK_REGIMES: a K split of 0 is refused, not a division by zero") {
  // Was SIGFPE: the K chunk rule took kchunk % (16 * ksplit) before ksplit was checked.
  const std::string msg = regime_error("1-8192:16x32x16x16x0:k16x1");
  CHECK(msg.find("'1-8192:16x32x16x16x0:k16x1'") != std::string::npos);  // names the item
  CHECK(msg.find("KSPLIT") != std::string::npos);                         // and the field
  // ... and BN = 0 (was 128 % 0).
  CHECK(regime_error("1-8192:16x0x16x16x1").find("BN") != std::string::npos);
}

TEST_CASE("SPARK_REGIMES: huge, negative, signed, zero and malformed numbers are refused") {
  const std::string_view nul_junk("1-8192:16x32x16x16x1\0junk", 25);
  const std::vector<std::string_view> bad = {
      // Past int: sscanf's %d was undefined here (glibc kept the low 32 bits: 2^32 + 16 read as 16).
      "1-8192:4294967312x32x16x16x1",
      "1-4294975488:16x32x16x16x1",
      "1-99999999999999999999999:16x32x16x16x1",
      "1-8192:wg:256x2x2x99999999999",
      // In int, but the arithmetic on them is not: m_max + 1, threads(), stage_bytes().
      "1-2147483647:16x32x16x16x1,-2147483648-8192:16x32x16x16x1",
      "1-8192:1073741824x128x16x16x1",
      "1-8192:16x32x16x16x1073741824",
      "1-8192:16x128x16x32x1:k64x2147483647",
      "1-8192:ws:1073741824x256x16x64x3",
      // Signs and spaces (sscanf skipped them).
      "+1-8192:16x32x16x16x1",
      " 1-8192:16x32x16x16x1",
      "1-8192:16x32x16x16x+1",
      "1-8192:16x32x16x16x-1",
      "1-8192:-16x32x16x16x1",
      "1-8192:16x128x16x32x1:k-16x2",
      "1-8192:16x128x16x32x1:k64x-1",
      "1-16:16x32x16x16x1, 17-8192:16x32x16x16x1",
      // Zeros.
      "0-0:0x0x0x0x0",
      "1-8192:0x0x0x0x0",
      "1-8192:16x32x0x16x1",
      "1-8192:16x32x16x0x1",
      "1-8192:16x128x16x32x1:k0x0",
      "1-8192:16x128x16x32x1:k0x1",
      "1-8192:wg:0x0x0",
      "1-8192:ws:0x0x0x0x0",
      "1-8192:16x32x16x16x1x0x0",
      // Out of the kernels' ranges.
      "1-8192:16x32x16x16x3",       // KSPLIT 1, 2 or 4
      "1-8192:16x32x16x16x1x3",     // STAGES 0..2
      "1-8192:16x128x16x32x1:k128x1",
      "1-8192:16x128x16x32x1:k64x1025",  // RING 1..1024
      "1-8192:2048x32x64x32x1",         // BM 16..1024
      "1-8192:ws:64x1024x32x64x3",  // BN 128, 256 or 512
      "1-8192:wg:256x2x2x3",        // NSPLIT 1 or 2
      "1-8193:16x32x16x16x1",
      // Trailing junk and empty items.
      "",
      ",",
      "1-8192:16x32x16x16x1,",
      ",1-8192:16x32x16x16x1",
      "1-16:16x32x16x16x1,,17-8192:16x32x16x16x1",
      "1-8192:16x32x16x16x1 ",
      "1-8192:16x32x16x16x1\n",
      nul_junk,
      "1-8192:16x32x16x16x1x",
      "1-8192:ws:64x256x32x64x3x",
      "1-8192:16x128x16x32x1:k64x2x",
      "1-8192:16x128x16x32x1:k64x2:flat:flat",
      "1-8192:16x32x16x16x1:flatx",
      "1-8192:16x32x16x16x1:",
      "1-8192:",
      "1-8192",
      "1-",
      "-8192:16x32x16x16x1",
  };
  for (const std::string_view text : bad) {
    CAPTURE(std::string(text));
    const std::string msg = regime_error(text);
    CHECK(msg.rfind("SPARK_REGIMES: ", 0) == 0);
  }
}

TEST_CASE("SPARK_REGIMES: valid tables parse to exactly the tiles they always did") {
  struct Case {
    const char* text;
    std::vector<std::string> tiles;
  };
  const std::vector<Case> cases = {
      {"1-8:16x32x16x16x2,9-8192:64x64x32x32x1",
       {"bm=16 bn=32 wm=16 wn=16 ksplit=2 stages=1 stationary=false wgmma=false groups=1 nsplit=1 kchunk=0 ring=1 "
        "flat=false min_blocks=0",
        "bm=64 bn=64 wm=32 wn=32 ksplit=1 stages=1 stationary=false wgmma=false groups=1 nsplit=1 kchunk=0 ring=1 "
        "flat=false min_blocks=0"}},
      {"1-16:128x64x32x32x1x1,17-8192:16x32x16x16x4x1",
       {"bm=128 bn=64 wm=32 wn=32 ksplit=1 stages=1 stationary=false wgmma=false groups=1 nsplit=1 kchunk=0 ring=1 "
        "flat=false min_blocks=0",
        "bm=16 bn=32 wm=16 wn=16 ksplit=4 stages=1 stationary=false wgmma=false groups=1 nsplit=1 kchunk=0 ring=1 "
        "flat=false min_blocks=0"}},
      {"1-32:16x128x16x32x2:k64x2,33-8192:32x64x16x32x1:k16x3",
       {"bm=16 bn=128 wm=16 wn=32 ksplit=2 stages=1 stationary=false wgmma=false groups=1 nsplit=1 kchunk=64 ring=2 "
        "flat=false min_blocks=0",
        "bm=32 bn=64 wm=16 wn=32 ksplit=1 stages=1 stationary=false wgmma=false groups=1 nsplit=1 kchunk=16 ring=3 "
        "flat=false min_blocks=0"}},
      {"1-16:16x128x16x32x1:k32x4:flat,17-8192:32x64x16x32x1x1:flat",
       {"bm=16 bn=128 wm=16 wn=32 ksplit=1 stages=1 stationary=false wgmma=false groups=1 nsplit=1 kchunk=32 ring=4 "
        "flat=true min_blocks=0",
        "bm=32 bn=64 wm=16 wn=32 ksplit=1 stages=1 stationary=false wgmma=false groups=1 nsplit=1 kchunk=0 ring=1 "
        "flat=true min_blocks=0"}},
      {"1-16:16x32x16x16x2,17-128:ws:32x128x16x32x3,129-8192:ws:64x512x32x64x4",
       {"bm=16 bn=32 wm=16 wn=16 ksplit=2 stages=1 stationary=false wgmma=false groups=1 nsplit=1 kchunk=0 ring=1 "
        "flat=false min_blocks=0",
        "bm=32 bn=128 wm=16 wn=32 ksplit=1 stages=3 stationary=true wgmma=false groups=1 nsplit=1 kchunk=0 ring=1 "
        "flat=false min_blocks=0",
        "bm=64 bn=512 wm=32 wn=64 ksplit=1 stages=4 stationary=true wgmma=false groups=1 nsplit=1 kchunk=0 ring=1 "
        "flat=false min_blocks=0"}},
      {"1-64:wg:128x1x2,65-128:wg:128x3x4,129-8192:wg:256x2x2x2",
       {"bm=64 bn=128 wm=64 wn=128 ksplit=1 stages=2 stationary=true wgmma=true groups=1 nsplit=1 kchunk=0 ring=1 "
        "flat=false min_blocks=0",
        "bm=64 bn=128 wm=64 wn=128 ksplit=1 stages=4 stationary=true wgmma=true groups=3 nsplit=1 kchunk=0 ring=1 "
        "flat=false min_blocks=0",
        "bm=64 bn=256 wm=64 wn=256 ksplit=1 stages=2 stationary=true wgmma=true groups=2 nsplit=2 kchunk=0 ring=1 "
        "flat=false min_blocks=0"}},
      // Leading zeros were, and stay, plain decimal.
      {"01-08192:016x032x016x016x02",
       {"bm=16 bn=32 wm=16 wn=16 ksplit=2 stages=1 stationary=false wgmma=false groups=1 nsplit=1 kchunk=0 ring=1 "
        "flat=false min_blocks=0"}},
  };
  for (const Case& c : cases) {
    CAPTURE(std::string(c.text));
    const auto table = parse_regime_table(c.text);
    REQUIRE(table.size() == c.tiles.size());
    for (size_t i = 0; i < table.size(); ++i) CHECK(fields(table[i].tile) == c.tiles[i]);
  }
  // Every built-in table, written as an override, parses back to itself.
  for (const ArchInfo& a : supported_archs()) {
    const auto table = regime_table(a.name);
    const std::string text = as_override(table);
    CAPTURE(text);
    const auto back = parse_regime_table(text);
    REQUIRE(back.size() == table.size());
    for (size_t i = 0; i < table.size(); ++i) {
      CHECK(back[i].regime == table[i].regime);
      CHECK(fields(back[i].tile) == fields(table[i].tile));
    }
  }
}

TEST_CASE("SPARK_REGIMES: every accepted tile's sizes stay far inside int") {
  // The largest of each field the rules admit.
  for (const char* text : {"1-8192:1024x128x1024x16x2x1", "1-8192:1024x128x1024x128x4x1:k64x1024",
                           "1-8192:ws:1024x512x1024x128x4", "1-8192:wg:256x3x4", "1-8192:wg:256x2x4x2"}) {
    CAPTURE(std::string(text));
    for (const RegimeEntry& e : parse_regime_table(text))
      for (int k : {128, 192})
        for (OutDtype o : {OutDtype::kBf16, OutDtype::kE4m3})
          for (WeightFormat w : kWeightFormats) {
            CHECK(e.tile.threads() <= 1024);
            CHECK(e.tile.smem_bytes(k, o, w) > 0);
            CHECK(e.tile.smem_bytes(k, o, w) < (1 << 28));
          }
  }
}


// ==================================================================================
// The built-in table as data
// ==================================================================================

namespace {

// Every key of the supported grid: each arch, each of its regimes, H 1..128, both K, both
// weight formats and outputs.
template <class Fn>
void for_each_supported_key(Fn&& fn) {
  for (const ArchInfo& a : supported_archs())
    for (const MRegime& m : table_regimes(builtin_tile_table(), a.name))
      for (int h = 1; h <= kMaxHeads; ++h)
        for (int k : {128, 192})
          for (WeightFormat w : kWeightFormats)
            for (OutDtype o : {OutDtype::kBf16, OutDtype::kE4m3}) fn(KernelKey::of(h, k, m, w, o, std::string(a.name)));
}

// The message parse_tile_table refuses `text` with.
std::string table_error(std::string_view text) {
  try {
    parse_tile_table(text, "t.table");
  } catch (const Error& e) {
    CHECK(e.status() == SPARK_ERROR_INVALID_ARGUMENT);
    return e.what();
  }
  FAIL_CHECK("parsed: '" << std::string(text) << "'");
  return {};
}

}  // namespace

TEST_CASE("tiles.table: every supported key finds a row whose tile fits its family and arch") {
  const TileTable& table = builtin_tile_table();
  REQUIRE(table.rows.size() > 50);
  size_t keys = 0;
  for_each_supported_key([&](const KernelKey& key) {
    ++keys;
    CAPTURE(key.name());
    const TileConfig t = tile_config(key, table);
    CHECK(t.threads() <= 1024);
    CHECK(t.smem_bytes(key.k, key.out, key.weights) <= arch_info(key.arch).max_smem_per_block);
    CHECK(key.k % (16 * t.ksplit) == 0);
    CHECK((!t.wgmma || key.arch == "sm_90a"));
    CHECK((!is_fp8(key.weights) || t.stationary || t.wn % 32 == 0));
    if (t.kchunk > 0) {
      CHECK(key.k % t.kchunk == 0);
      CHECK(t.ring >= 1);
      CHECK(t.ring <= key.k / t.kchunk);
    }
    CHECK(t.min_blocks == min_blocks_for(t));
  });
  CHECK(keys > 40000);
}

TEST_CASE("tiles.table: every row is the first match of some supported key, and cites its measurement") {
  const TileTable& table = builtin_tile_table();
  std::set<int> reached;
  for_each_supported_key([&](const KernelKey& key) {
    for (const TileRow& row : table.rows)
      if (row.matches(key)) {
        reached.insert(row.line);
        break;
      }
  });
  for (const TileRow& row : table.rows) {
    CAPTURE(row.line);
    CHECK_MESSAGE(reached.count(row.line) == 1, "row at line ", row.line, " is shadowed by the rows above it");
    CHECK_MESSAGE(row.evidence.size() > 10, "row at line ", row.line, " cites no measurement");
  }
}

TEST_CASE("tiles.table: the regimes of each arch") {
  const TileTable& table = builtin_tile_table();
  CHECK(table_regimes(table, "sm_90a").size() == 7);
  for (const char* arch : {"sm_90", "sm_100a", "sm_103a", "sm_110a"}) CHECK(table_regimes(table, arch).size() == 4);
  for (const char* arch : {"sm_80", "sm_86", "sm_87", "sm_89", "sm_120a", "sm_121a"})
    CHECK(table_regimes(table, arch).size() == 3);
}

TEST_CASE("tiles.table: a table is pure data; tile_config reads only the table it is given") {
  const std::string text =
      "group all = sm_80,sm_86,sm_87,sm_89,sm_90,sm_90a,sm_100a,sm_103a,sm_110a,sm_120a,sm_121a\n"
      "all 1-16     64-128 * * * 16x128x16x32x2:k64x2   # wide\n"
      "all 1-16     *      * * * 16x64x16x32x2          # narrow\n"
      "*   17-8192  *      * * * 32x64x16x32x1:k32      # a slot per chunk\n";
  const TileTable t = parse_tile_table(text, "test");
  KernelKey key;
  key.heads = 128;
  key.k = 192;
  key.n = 512;
  key.r = 64;
  key.regime = {1, 16};
  key.arch = "sm_89";
  CHECK(tile_config(key, t).bn == 128);
  CHECK(tile_config(key, t).ring == 2);  // two slots, of K's three chunks
  key.heads = 8;
  CHECK(tile_config(key, t).bn == 64);
  key.regime = {17, 8192};
  CHECK(tile_config(key, t).ring == 6);  // 192 / 32
  key.k = 128;
  CHECK(tile_config(key, t).ring == 4);
  key.regime = {17, 32};
  CHECK_THROWS_AS(tile_config(key, t), Error);  // no such regime here
}

TEST_CASE("tiles.table: malformed tables are refused naming the line and the rule") {
  const std::string all = "* 1-8192 * * * * 16x64x16x32x2 # x\n";
  CHECK(table_error("* 1-16 * * * * 16x64x16x32x2\n").find("cover M = 1..8192") != std::string::npos);
  CHECK(table_error("* 1-16 * * * * 16x64x16x32x2\n* 10-8192 * * * * 16x64x16x32x2\n").find("overlap") !=
        std::string::npos);
  CHECK(table_error("* 1-8192 * * * 16x64x16x32x2\n").find("t.table line 1: expected 7 columns") !=
        std::string::npos);
  CHECK(table_error(all + "sm_91 1-8192 * * * * 16x64x16x32x2\n").find("sm_91") != std::string::npos);
  CHECK(table_error(all + "* 1-8192 0-8 * * * 16x64x16x32x2\n").find("t.table line 2") != std::string::npos);
  CHECK(table_error(all + "* 1-8192 9-8 * * * 16x64x16x32x2\n").find("empty") != std::string::npos);
  CHECK(table_error(all + "* 1-8192 * 96 * * 16x64x16x32x2\n").find("K '96'") != std::string::npos);
  CHECK(table_error(all + "* 1-8192 * * fp4 * 16x64x16x32x2\n").find("fp4") != std::string::npos);
  CHECK(table_error(all + "* 1-8192 * * * * 16x48x16x16x2\n").find("BN") != std::string::npos);
  CHECK(table_error(all + "* 1-8192 * * * * 16x64x16x32x2x2\n").find("STAGES") != std::string::npos);
  CHECK(table_error(all + "group g = sm_80 sm_86\n").find("group NAME") != std::string::npos);
  CHECK(table_error("\n\n\n* 1-8192 * * * * wg:64x2x2\n").find("t.table line 4") != std::string::npos);
}

TEST_CASE("launch bounds are a rule of the tile") {
  TileConfig per_tile{16, 128, 16, 32, 2, 1};  // 256 threads: room for two per SM
  CHECK(min_blocks_for(per_tile) == 2);
  TileConfig small{16, 64, 16, 32, 2, 1};  // 128 threads: ptxas decides
  CHECK(min_blocks_for(small) == 0);
  TileConfig ws{32, 128, 16, 32, 1, 3};
  ws.stationary = true;  // 256 threads, alone on its SM
  CHECK(min_blocks_for(ws) == 1);
}

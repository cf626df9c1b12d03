#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/cubin_elf.h"
#include "core/error.h"
#include "core/key_name.h"
#include "jit/arch.h"
#include "jit/compile.h"
#include "ops/common/schedule.h"
#include "ops/mla_oproj/key.h"
#include "ops/mla_oproj/render.h"

using namespace spark;
using spark::oproj::Key;

namespace {
Key key(int heads, int v, MRegime regime, WeightFormat w = WeightFormat::kBf16, OutDtype out = OutDtype::kBf16,
        const char* arch = "sm_90a") {
  return Key::of(heads, v, regime, w, out, arch);
}
bool is_elf(const std::string& b) { return b.size() > 64 && std::memcmp(b.data(), "\x7f" "ELF", 4) == 0; }

// Compiles the sources a few at a time, each for its arch without spills, then `more` on each.
template <class More>
void compile_each(const std::vector<oproj::RenderedSource>& sources, More more) {
  const size_t width = std::clamp<size_t>(std::thread::hardware_concurrency(), 2, 8);
  for (size_t first = 0; first < sources.size(); first += width) {
    std::vector<std::future<CompiledKernel>> jobs;
    for (size_t i = first; i < std::min(sources.size(), first + width); ++i)
      jobs.push_back(std::async(std::launch::async, [&s = sources[i]] { return compile(s); }));
    for (size_t i = 0; i < jobs.size(); ++i) {
      CAPTURE(sources[first + i].summary);
      CAPTURE(sources[first + i].key);
      const CompiledKernel c = jobs[i].get();
      CHECK(cubin_problem(c.cubin, sources[first + i].arch, oproj::kKernelEntryName) == "");
      CHECK(c.resources.spill_bytes == 0);
      more(sources[first + i], c);
    }
  }
}
}  // namespace

TEST_CASE("oproj keys print one name and parse back exactly") {
  const Key k = key(16, 128, {1, 16}, WeightFormat::kFp8Block128, OutDtype::kE4m3);
  CHECK(k.name() == "mla_oproj.h16.v128.l512.m1-16.wfp8-block.oe4m3.sm_90a");
  CHECK(Key::parse(k.name()) == k);
  CHECK(oproj::is_canonical_key_name(k.name()));
  CHECK(is_op_key_name(k.name()));  // the registry knows the op: the cache keeps its entries
  CHECK(kernel_symbol(oproj::kOp) == oproj::kKernelEntryName);
  for (const char* bad : {"mla_oproj.h16.v128.l512.m1-16.wbf16.obf16",         // no arch
                          "mla_oproj.h016.v128.l512.m1-16.wbf16.obf16.sm_90a",  // leading zero
                          "mla_oproj.h16.k128.l512.m1-16.wbf16.obf16.sm_90a",   // wrong field letter
                          "mla_oproj.h16.v128.l512.m16-1.wbf16.obf16.sm_90a",   // empty regime
                          "mla_oproj.h16.v128.l512.m1-16.wfp4.obf16.sm_90a",    // unknown format
                          "mla_qproj.h16.v128.l512.m1-16.wbf16.obf16.sm_90a",   // another op
                          "mla_oproj.h16.v128.l512.m1-16.wbf16.obf16.sm_90a\n"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(Key::parse(bad), Error);
    CHECK_FALSE(oproj::is_canonical_key_name(bad));
  }
}

TEST_CASE("oproj regimes cover 1..8192 and each renders its own source") {
  const auto& regimes = oproj::regimes();
  REQUIRE_FALSE(regimes.empty());
  CHECK(regimes.front().m_min == 1);
  CHECK(regimes.back().m_max == oproj::kMaxM);
  for (size_t i = 1; i < regimes.size(); ++i) CHECK(regimes[i].m_min == regimes[i - 1].m_max + 1);
  CHECK(oproj::regimes_up_to(1).size() == 1);
  CHECK(oproj::regimes_up_to(oproj::kMaxM).size() == regimes.size());

  const Key k = key(8, 256, regimes.front(), WeightFormat::kMxfp8, OutDtype::kE4m3);
  const oproj::RenderedSource a = oproj::render(k);
  CHECK(a.source == oproj::render(Key::parse(k.name())).source);
  CHECK(a.source.rfind("// spark kernel " + k.name() + "\n", 0) == 0);
  CHECK(a.source.find("#include \"mla_oproj.cuh\"") != std::string::npos);
  // The stationary schedule: sm_90a past decode only, a source of its own (so its cache
  // entries never mix with the tiled ones).
  using oproj::Schedule;
  const oproj::RenderedSource wg = oproj::render(key(8, 256, regimes.back()), Schedule::kStationary);
  CHECK(wg.tile.stationary);
  CHECK(wg.source.find("#include \"mla_oproj_wg.cuh\"") != std::string::npos);
  CHECK(wg.source != oproj::render(key(8, 256, regimes.back()), Schedule::kTiled).source);
  // From M = 1024: two teams of five stages, filling the SM's shared memory with bf16
  // output (V = 256); below M = 1024 with 8 (head, 128 columns) blocks one warp group with ten.
  CHECK(wg.threads == 256);
  CHECK((wg.tile.groups == 2 && wg.tile.stages == 5));
  CHECK(wg.smem_bytes == wg.tile.smem_bytes(key(8, 256, regimes.back())));
  CHECK(wg.smem_bytes == arch_info("sm_90a").max_smem_per_block);
  CHECK(wg.tile.describe().find("2 teams of 5 o stages") != std::string::npos);
  CHECK(oproj::render(key(8, 128, regimes.back()), Schedule::kStationary).tile.groups == 2);
  for (int v : {128, 256}) {
    const oproj::RenderedSource one =
        oproj::render(key(1024 / v, v, regimes[regimes.size() - 2]), Schedule::kStationary);
    CHECK((one.threads == 128 && one.tile.groups == 1 && one.tile.stages == 10));
    CHECK(one.smem_bytes <= arch_info("sm_90a").max_smem_per_block);
  }
  CHECK_FALSE(oproj::render(key(8, 256, regimes.front()), Schedule::kStationary).tile.stationary);
  CHECK_FALSE(oproj::tile_for(key(8, 256, regimes.back(), WeightFormat::kBf16, OutDtype::kBf16, "sm_100a"),
                              Schedule::kStationary)
                  .stationary);
  CHECK(oproj::parse_schedule("tiled") == Schedule::kTiled);
  CHECK(oproj::parse_schedule("stationary") == Schedule::kStationary);
  for (const char* bad : {"", "Stationary", "wg", "tiled "}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(oproj::parse_schedule(bad), doctest::Contains("SPARK_OPROJ_SCHEDULE"), Error);
  }
  CHECK(a.threads == a.tile.threads());
  CHECK(a.smem_bytes == a.tile.smem_bytes(k));
  CHECK(oproj::render(key(8, 256, regimes.back(), WeightFormat::kMxfp8, OutDtype::kE4m3)).source != a.source);
  CHECK(oproj::render(key(8, 128, regimes.front(), WeightFormat::kMxfp8, OutDtype::kE4m3)).source != a.source);

  // Outside the op: refused with the reason.
  CHECK_THROWS_WITH_AS(oproj::render(key(8, 192, regimes.front())), doctest::Contains("v_head_dim"), Error);
  CHECK_THROWS_WITH_AS(oproj::render(key(129, 128, regimes.front())), doctest::Contains("heads"), Error);
  CHECK_THROWS_WITH_AS(oproj::render(key(8, 128, {1, 7})), doctest::Contains("regimes"), Error);
  CHECK_THROWS_AS(oproj::render(key(8, 128, regimes.front(), WeightFormat::kBf16, OutDtype::kBf16, "sm_75")),
                  Error);
}

TEST_CASE("oproj auto schedule: ring, tiled or stationary by regime, heads and format") {
  using oproj::Schedule;
  const std::vector<MRegime> r = oproj::regimes(Schedule::kAuto);
  REQUIRE(r.size() == 9);
  CHECK((r[0] == MRegime{1, 8} && r[1] == MRegime{9, 16} && r[2] == MRegime{17, 32} && r[3] == MRegime{33, 64} &&
         r[4] == MRegime{65, 128} && r[5] == MRegime{129, 256} && r[6] == MRegime{257, 512} &&
         r[7] == MRegime{513, 1023} && r[8] == MRegime{1024, oproj::kMaxM}));
  const auto tile = [](int heads, int v, const MRegime& regime, WeightFormat w, const char* arch) {
    return oproj::tile_for(key(heads, v, regime, w, OutDtype::kBf16, arch), Schedule::kAuto);
  };
  const auto is_ring = [](const oproj::Tile& t) {
    return t.ring && t.bn == 32 && t.ksplit == 4 && t.tm == 2 && t.stages == 2;
  };
  const auto is_tiled = [](const oproj::Tile& t, int tm) {
    return !t.ring && !t.stationary && !t.pre && t.tm == tm;
  };
  for (WeightFormat w : kWeightFormats) {
    const std::string format(to_string(w));
    CAPTURE(format);
    const bool fp8 = w != WeightFormat::kBf16;
    // Decode: the tiled kernel, but from 64 (head, 128 columns) blocks with bf16 weights on
    // sm_90a the stationary one (one team, its decode form), for either output.
    for (int heads : {1, 8, 32}) CHECK(is_tiled(tile(heads, 128, r[0], w, "sm_90a"), 1));
    CHECK(is_tiled(tile(16, 256, r[0], w, "sm_90a"), 1));
    // Its narrow tile (32 columns; under 32 heads at V = 128, 16 at V = 256) splits L four
    // ways at decode with bf16 weights, eight with FP8 weights and past decode.
    for (const auto& [heads, v] : {std::pair{8, 128}, std::pair{16, 128}, std::pair{8, 256}}) {
      const oproj::Tile t = tile(heads, v, r[0], w, "sm_90a");
      CHECK((t.bn == 32 && t.ksplit == (fp8 ? 8 : 4) && t.threads() == (fp8 ? 256 : 128)));
      CHECK(tile(heads, v, r[3], w, "sm_90a").ksplit == 8);
    }
    // Both decode regimes take the same tiles, but for 32 blocks (the narrow tile's limit): 64
    // columns at M 1-8, 32 (four along L, any weights) at 9-16.
    for (const auto& [heads, v] : {std::pair{16, 256}, std::pair{32, 128}}) {
      CHECK(tile(heads, v, r[0], w, "sm_90a").bn == 64);
      const oproj::Tile upper = tile(heads, v, r[1], w, "sm_90a");
      CHECK((is_tiled(upper, 1) && upper.bn == 32 && upper.ksplit == 4));
      CHECK((tile(heads, v, r[1], w, "sm_100a").bn == 32 && tile(heads, v, r[1], w, "sm_80").bn == 32));
    }
    for (const auto& [heads, v] : {std::pair{1, 128}, std::pair{8, 128}, std::pair{31, 128}, std::pair{15, 256},
                                   std::pair{33, 128}, std::pair{17, 256}, std::pair{64, 128}, std::pair{128, 256}})
      for (const char* arch : {"sm_90a", "sm_100a"}) {
        CAPTURE(heads);
        CAPTURE(v);
        const oproj::Tile lo = tile(heads, v, r[0], w, arch), hi = tile(heads, v, r[1], w, arch);
        CHECK((lo.bn == hi.bn && lo.ksplit == hi.ksplit && lo.stationary == hi.stationary && lo.tm == hi.tm));
      }
    for (const auto& [heads, v] :
         {std::pair{32, 256}, std::pair{64, 128}, std::pair{64, 256}, std::pair{128, 128}, std::pair{128, 256}}) {
      for (OutDtype out : {OutDtype::kBf16, OutDtype::kE4m3}) {
        const oproj::Tile t = oproj::tile_for(key(heads, v, r[0], w, out), Schedule::kAuto);
        CHECK(t.stationary == !fp8);
        CHECK(is_tiled(t, 1) == fp8);
        CHECK(t.groups == 1);
      }
      CHECK(is_tiled(tile(heads, v, r[0], w, "sm_100a"), 1));
    }
    // M 17-32: the ring below 64 (head, 128 columns) blocks (128 with FP8 weights).
    CHECK(is_ring(tile(32, 128, r[2], w, "sm_90a")));
    CHECK(tile(64, 128, r[2], w, "sm_90a").stationary == !fp8);
    CHECK(is_ring(tile(64, 128, r[2], w, "sm_90a")) == fp8);
    CHECK(tile(64, 256, r[2], w, "sm_90a").stationary);
    // M 33-64: tiled below 32 blocks (64 with FP8 weights).
    CHECK(is_tiled(tile(16, 128, r[3], w, "sm_90a"), 2));
    CHECK(tile(32, 128, r[3], w, "sm_90a").stationary == !fp8);
    CHECK(tile(32, 256, r[3], w, "sm_90a").stationary);
    // Past M = 64: stationary at any head count, but FP8 weights stay tiled at M 65-128 up to
    // 16 (head, 128 columns) blocks and at 129-256 up to 8.  Two teams from M = 1024; at
    // 513-1023 from 16 blocks (8 with FP8 weights), at 257-512 from 32 (16), at 129-256 from
    // 32 (20) and at 65-128 from 64.
    for (int v : {128, 256}) {
      const auto heads_of = [v](int blocks) { return std::max(1, blocks * 128 / v); };
      for (int heads : {1, heads_of(16)}) CHECK(tile(heads, v, r[4], w, "sm_90a").stationary == !fp8);
      CHECK(is_tiled(tile(heads_of(16), v, r[4], w, "sm_90a"), 2) == fp8);
      CHECK(tile(heads_of(32), v, r[4], w, "sm_90a").stationary);
      CHECK(is_tiled(tile(heads_of(8), v, r[5], w, "sm_90a"), 2) == fp8);
      for (const MRegime& regime : {r[5], r[6], r[7], r[8]})
        CHECK(tile(heads_of(16), v, regime, w, "sm_90a").stationary);
      // (blocks, regime, two teams with bf16 weights, with FP8 weights); every one stationary.
      const struct {
        int blocks;
        MRegime regime;
        bool bf16, fp8;
      } teams[] = {{32, r[4], false, false}, {64, r[4], true, true},  {9, r[5], false, false},
                   {16, r[5], false, false}, {18, r[5], false, false}, {19, r[5], false, false},
                   {20, r[5], false, true},  {24, r[5], false, true},  {31, r[5], false, true},
                   {32, r[5], true, true},   {8, r[6], false, false},  {14, r[6], false, false},
                   {15, r[6], false, false}, {16, r[6], false, true},  {30, r[6], false, true},
                   {31, r[6], false, true},  {32, r[6], true, true},   {6, r[7], false, false},
                   {7, r[7], false, false},  {8, r[7], false, true},   {14, r[7], false, true},
                   {15, r[7], false, true},  {16, r[7], true, true},   {1, r[6], false, false},
                   {2, r[7], false, false},  {1, r[8], true, true},    {2, r[8], true, true},
                   {64, r[3], false, false}};
      for (const auto& t : teams) {
        if (t.blocks * 128 % v) continue;  // not a whole number of heads at this V
        CAPTURE(t.blocks);
        CAPTURE(t.regime.m_min);
        const oproj::Tile got = tile(heads_of(t.blocks), v, t.regime, w, "sm_90a");
        CHECK(got.stationary);
        CHECK(got.groups == ((fp8 ? t.fp8 : t.bf16) ? 2 : 1));
      }
      CHECK(tile(128, v, r[7], w, "sm_90a").groups == 2);
      CHECK(tile(128, v, r[8], w, "sm_90a").groups == 2);
    }
    // Off sm_90a: the ring at M 17-32, tiled past it.
    CHECK(is_ring(tile(128, 256, r[2], w, "sm_100a")));
    CHECK(is_tiled(tile(128, 256, r[3], w, "sm_100a"), 2));
    CHECK(is_tiled(tile(128, 256, r[4], w, "sm_100a"), 2));
    CHECK(is_tiled(tile(128, 256, r[5], w, "sm_100a"), 2));
    for (const MRegime& regime : {r[6], r[7], r[8]})
      CHECK(is_tiled(tile(128, 256, regime, w, "sm_100a"), 2));
    // Where two ring CTAs do not fit an SM (bf16 weights on a 100 KB arch), tiled.
    const oproj::Tile small_sm = tile(8, 128, r[2], w, "sm_89");
    CHECK(small_sm.ring == fp8);
    if (small_sm.ring)
      CHECK(2 * (small_sm.smem_bytes(key(8, 128, r[2], w, OutDtype::kBf16, "sm_89")) + 1024) <=
            arch_info("sm_89").max_smem_per_block + 1024);
  }
  // The stationary kernel's decode form in both decode regimes (bf16 weights, 64 blocks).
  for (const MRegime& regime : {r[0], r[1]})
    CHECK(oproj::render(key(64, 256, regime), Schedule::kAuto).source.find("kDecode = true") != std::string::npos);
  // The explicit schedules: tiled everywhere, stationary past decode on sm_90a.
  CHECK_FALSE(oproj::tile_for(key(8, 128, r[2]), Schedule::kTiled).ring);
  CHECK_FALSE(oproj::tile_for(key(128, 128, r[0]), Schedule::kTiled).stationary);
  CHECK_FALSE(oproj::tile_for(key(128, 128, r[0]), Schedule::kStationary).stationary);
  CHECK_FALSE(oproj::tile_for(key(8, 128, r[4]), Schedule::kTiled).stationary);
  CHECK(oproj::tile_for(key(8, 128, r[2]), Schedule::kStationary).stationary);
  CHECK(oproj::parse_schedule("auto") == Schedule::kAuto);
}

TEST_CASE("NVRTC compiles every oproj kernel shape on every arch, without spills") {
  // Each distinct (arch, tile, V, weights, output): the tile depends on heads (narrow or
  // wide CTAs), the regime and the schedule.
  struct Job {
    Key key;
    oproj::Schedule schedule;
  };
  std::vector<Job> keys;
  std::vector<std::string> seen;
  for (const ArchInfo& a : supported_archs())
    for (int heads : {8, 16, 128})  // 16: 32 blocks at V = 256, the 9-16 regime's own tile
      for (int v : {128, 256})
        for (WeightFormat w : kWeightFormats)
          for (OutDtype out : {OutDtype::kBf16, OutDtype::kE4m3})
            for (const MRegime& r : oproj::regimes())
              for (const oproj::Schedule schedule :
                   {oproj::Schedule::kAuto, oproj::Schedule::kTiled, oproj::Schedule::kStationary}) {
                // Every arch compiles bf16 in and out; the conversions' two paths (sm_80's
                // software e4m3, sm_89+'s instructions) on sm_80, sm_90a and sm_120a.
                const bool converting = w != WeightFormat::kBf16 || out != OutDtype::kBf16;
                if (converting && a.name != "sm_80" && a.name != "sm_90a" && a.name != "sm_120a") continue;
                const Key k = key(heads, v, r, w, out, std::string(a.name).c_str());
                const oproj::Tile t = oproj::tile_for(k, schedule);
                const std::string id = std::string(a.name) + t.describe() + std::to_string(v) +
                                       std::string(to_string(w)) + std::string(to_string(out));
                if (std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
                seen.push_back(id);
                keys.push_back({k, schedule});
              }
  MESSAGE(keys.size() << " distinct oproj kernels");
  const size_t width = std::clamp<size_t>(std::thread::hardware_concurrency(), 2, 8);
  for (size_t first = 0; first < keys.size(); first += width) {
    std::vector<std::future<CompiledKernel>> jobs;
    for (size_t i = first; i < std::min(keys.size(), first + width); ++i)
      jobs.push_back(
          std::async(std::launch::async, [j = keys[i]] { return compile(oproj::render(j.key, j.schedule)); }));
    for (size_t i = 0; i < jobs.size(); ++i) {
      const Key& k = keys[first + i].key;
      CAPTURE(k.name());
      const CompiledKernel c = jobs[i].get();
      CHECK(is_elf(c.cubin));
      CHECK(cubin_problem(c.cubin, k.arch, oproj::kKernelEntryName) == "");
      CHECK(c.resources.registers > 0);
      CHECK(c.resources.spill_bytes == 0);
    }
  }
}

TEST_CASE("oproj auto schedule: one kernel for both outputs of a shape (e4m3 is the bf16 output quantised)") {
  // The e4m3 output must be quantize(bf16 output) bit for bit, so a shape's two outputs take
  // the same tile: different kernels sum in different orders, and a bf16 rounding apart
  // changes an e4m3 code now and then (as it did at H = 64, V = 256, M = 1 when decode chose
  // the stationary kernel for bf16 output only).
  for (const ArchInfo& a : supported_archs())
    for (int heads = 1; heads <= 128; heads *= 2)
      for (int v : {128, 256})
        for (WeightFormat w : kWeightFormats)
          for (const MRegime& r : oproj::regimes())
            for (const oproj::Schedule schedule :
                 {oproj::Schedule::kAuto, oproj::Schedule::kTiled, oproj::Schedule::kStationary}) {
              const std::string arch(a.name);
              const oproj::Tile b = oproj::tile_for(key(heads, v, r, w, OutDtype::kBf16, arch.c_str()), schedule);
              const oproj::Tile e = oproj::tile_for(key(heads, v, r, w, OutDtype::kE4m3, arch.c_str()), schedule);
              CAPTURE(arch);
              CAPTURE(heads);
              CAPTURE(v);
              CAPTURE(r.m_min);
              CHECK(b.describe() == e.describe());
            }
}

TEST_CASE("SPARK_OPROJ_TILES: the tuning override's regimes and tiles") {
  using oproj::Tiling;
  const Tiling tiling(oproj::parse_tile_override("1-8:32x16x1,9-64:64x4x2,65-8192:wg:8"));
  const std::vector<MRegime> regimes = oproj::regimes(tiling);
  REQUIRE(regimes.size() == 3);
  CHECK((regimes[0] == MRegime{1, 8} && regimes[1] == MRegime{9, 64} && regimes[2] == MRegime{65, 8192}));
  CHECK(oproj::regimes_up_to(9, tiling).size() == 2);
  const oproj::Tile a = oproj::tile_for(key(8, 128, regimes[0]), tiling);
  CHECK((!a.stationary && a.bn == 32 && a.ksplit == 16 && a.tm == 1 && a.threads() == 512));
  const oproj::Tile b = oproj::tile_for(key(128, 256, regimes[1]), tiling);
  CHECK((!b.stationary && b.bn == 64 && b.ksplit == 4 && b.tm == 2 && b.bm() == 32));
  const oproj::Tile c = oproj::tile_for(key(8, 128, regimes[2]), tiling);
  CHECK((c.stationary && c.stages == 8 && c.groups == 1 && c.bn == 128));
  // Two teams: wg:STAGESxTEAMS, each team's ring counted in the shared memory (the parser
  // refuses a table beyond sm_90a's, below).
  const Tiling teams(oproj::parse_tile_override("1-64:64x4x2,65-8192:wg:5x2"));
  const oproj::Tile t = oproj::tile_for(key(8, 256, {65, 8192}), teams);
  CHECK((t.stationary && t.stages == 5 && t.groups == 2 && t.threads() == 256));
  CHECK(oproj::render(key(8, 256, {65, 8192}), teams).source.find("kStages = 5, kGroups = 2") != std::string::npos);
  // wg needs sm_90a: elsewhere the regime takes the built-in tiled tile for its M range.
  const oproj::Tile d = oproj::tile_for(key(8, 128, regimes[2], WeightFormat::kBf16, OutDtype::kBf16, "sm_100a"), tiling);
  CHECK((!d.stationary && d.bn == 32 && d.ksplit == 8 && d.tm == 2));

  // Rendered: the override's tile in the source; a regime of another table is refused.
  const oproj::RenderedSource r = oproj::render(key(8, 128, regimes[0]), tiling);
  CHECK(r.source.find("BN = 32, KSPLIT = 16, TM = 1") != std::string::npos);
  CHECK(r.threads == 512);
  CHECK(oproj::render(key(8, 128, regimes[2]), tiling).source.find("kStages = 8") != std::string::npos);
  // The stationary kernel's decode form (weights streamed into the MMAs block by block, o
  // through registers) exactly where one team takes regime 1-16, at any ring depth.
  for (const char* table : {"1-16:wg:3,17-8192:wg:10", "1-16:wg:10,17-8192:wg:10"}) {
    const Tiling wg(oproj::parse_tile_override(table));
    CAPTURE(table);
    CHECK(oproj::render(key(8, 128, {1, 16}), wg).source.find("kDecode = true") != std::string::npos);
    CHECK(oproj::render(key(8, 128, {17, 8192}), wg).source.find("kDecode = false") != std::string::npos);
  }
  CHECK(oproj::render(key(8, 128, {1, 16}), Tiling(oproj::parse_tile_override("1-16:wg:5x2,17-8192:wg:10")))
            .source.find("kDecode = false") != std::string::npos);
  CHECK(oproj::render(key(8, 128, {65, 8192}), tiling).source.find("kDecode = false") != std::string::npos);
  CHECK_THROWS_WITH_AS(oproj::render(key(8, 128, {1, 16}), tiling), doctest::Contains("regimes"), Error);

  // Every rule, named: the variable, the item and what it breaks.
  const std::pair<const char*, const char*> bad[] = {
      {"", "item 1"},
      {"1-8192:32x8x1,", "item 2 of '1-8192:32x8x1,' is empty"},
      {"1-8192:32x8x1,9-16:32x8x1", "comes after the regime that ends at M = 8192"},
      {"2-8192:32x8x1", "must start at M = 1"},
      {"1-16:32x8x1", "must end at M = 8192"},
      {"1-16:32x8x1,18-8192:64x4x2", "must start at M = 17"},
      {"1-0:32x8x1", "outside 1..8192"},
      {"1-8193:32x8x1", "outside 1..8192"},
      {"1-8192:48x8x1", "BN must be 32, 64 or 128"},
      {"1-8192:32x2x1", "KSPLIT must be 4, 8 or 16"},
      {"1-8192:32x12x1", "KSPLIT must be 4, 8 or 16"},
      {"1-8192:32x8x5", "TM is 5, outside 1..4"},
      {"1-8192:128x8x1", "needs 1024 threads (BN / 32 x KSPLIT warps), more than 512"},
      {"1-8192:128x4x2", "16 / KSPLIT + TM must be at most 5"},
      {"1-8192:64x8x4", "too few for 2 L chunks of weights and 4 M tiles"},
      {"1-8192:wg:2", "STAGES is 2, outside 3..10"},
      {"1-8192:wg:11", "STAGES is 11"},
      {"1-8192:wg:5x3", "TEAMS is 3, outside 1..2"},
      {"1-8192:wg:6x2", "2 teams of 6 o stages need 248832 bytes of shared memory with bf16 output, more than "
                        "sm_90a's 232448"},
      {"1-16:wg:8x2,17-8192:64x4x2", "2 teams of 8 o stages"},
      {"1-8192:wg:5x", "TEAMS"},
      {"1-8192:wg:5x2x1", "expected the end of the item"},
      {"1-8192:wg", "expected BN at 'wg'"},
      {"1-8192:32x8", "expected 'x' at its end"},
      {"1-8192:32x8x1x1", "expected the end of the item"},
      {"1-8192:+32x8x1", "expected BN"},
      {"1-8192:32x8x99999999999", "TM is 99999999999, outside 1..4"},
      {"1-8192:ws:64x128", "expected BN"},
      {"1-64:ring:32x4x3,65-8192:wg:8", "a ring serves M up to 32"},
      {"1-16:32x8x1,17-32:ring:32x8x2,33-8192:wg:8", "room a lane has only in a 128-thread ring"},
      {"1-16:ring:128x4x3,17-8192:wg:8", "BN is 128, outside 32..64"},
      {"1-16:ring:48x4x3,17-8192:wg:8", "a ring's BN must be 32 or 64"},
      {"1-16:ring:32x6x3,17-8192:wg:8", "a ring's KSPLIT must be 4 or 8"},
      {"1-16:ring:32x16x3,17-8192:wg:8", "KSPLIT is 16, outside 4..8"},
      {"1-16:ring:32x4x5,17-8192:wg:8", "STAGES is 5, outside 2..4"},
      {"1-16:ring:32x4x1,17-8192:wg:8", "STAGES is 1, outside 2..4"},
      {"1-16:ring:64x8x2,17-8192:wg:8", "a ring of 512 threads"},
      {"1-16:ring:64x4x2,17-8192:wg:8", "a ring of 256 threads needs KSPLIT 8"},
      {"1-16:ring:32x4,17-8192:wg:8", "expected 'x' at"},
  };
  for (const auto& [text, rule] : bad) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(oproj::parse_tile_override(text), doctest::Contains("SPARK_OPROJ_TILES"), Error);
    CHECK_THROWS_WITH_AS(oproj::parse_tile_override(text), doctest::Contains(rule), Error);
  }
}

TEST_CASE("SPARK_OPROJ_TILES ring tiles: decode units in a ring of slots, half an SM each") {
  using oproj::Tiling;
  const Tiling tiling(oproj::parse_tile_override("1-4:ring:32x4x3,5-16:ring:32x4x4,17-8192:wg:10"));
  const std::vector<MRegime> regimes = oproj::regimes(tiling);
  REQUIRE(regimes.size() == 3);
  const Key bf16 = key(128, 128, regimes[0]);
  const oproj::Tile a = oproj::tile_for(bf16, tiling);
  CHECK((a.ring && !a.stationary && a.bn == 32 && a.ksplit == 4 && a.stages == 3 && a.bm() == 16));
  CHECK(a.threads() == 128);
  // Three 32-row slots of 1 KB rows and four warp rows' 16 x 32 partial sums: 104 KB, two of
  // which (with 1 KB each) fit sm_90a's 228 KB.
  CHECK(a.smem_bytes(bf16) == 3 * 32 * 1024 + 4 * 16 * 32 * 4);
  CHECK(2 * (a.smem_bytes(bf16) + 1024) <= arch_info("sm_90a").max_smem_per_block + 1024);
  const oproj::RenderedSource r = oproj::render(bf16, tiling);
  CHECK(r.source.find("#include \"mla_oproj_ring.cuh\"") != std::string::npos);
  CHECK(r.source.find("BN = 32, KSPLIT = 4, kStages = 3") != std::string::npos);
  CHECK(r.source.find("__launch_bounds__(128, 2)") != std::string::npos);
  CHECK(r.smem_bytes == a.smem_bytes(bf16));
  // FP8 slots are half the bytes plus the scales, raised to a third of the SM so that no
  // third CTA fits: 32 x (512 + 16) x 3 + 8 KB is below it.
  const Key mx = key(128, 128, regimes[0], WeightFormat::kMxfp8, OutDtype::kE4m3);
  const int sm = arch_info("sm_90a").max_smem_per_block + 1024;
  CHECK(a.smem_bytes(mx) == sm / 3 - 1024 + 16);
  CHECK(3 * (a.smem_bytes(mx) + 1024) > sm);
  // Whole 16-byte vectors on every arch, and still no third CTA (sm_80: 164 KB an SM).
  const Key mx80 = key(128, 128, regimes[0], WeightFormat::kMxfp8, OutDtype::kE4m3, "sm_80");
  CHECK(a.smem_bytes(mx80) % 16 == 0);
  CHECK(3 * (a.smem_bytes(mx80) + 1024) > arch_info("sm_80").max_smem_per_block + 1024);
  CHECK(2 * (a.smem_bytes(mx80) + 1024) <= arch_info("sm_80").max_smem_per_block + 1024);
  CHECK(oproj::render(mx, tiling).source.find(fmt::format("kSmemFloor = {}", sm / 3 - 1024 + 16)) !=
        std::string::npos);
  // Four slots: FP8 weights fit two CTAs an SM, bf16 weights (128 KB of slots) do not, so they
  // take the built-in tiled tile; so does an arch with 100 KB an SM.
  CHECK(oproj::tile_for(key(128, 128, regimes[1], WeightFormat::kFp8Block128, OutDtype::kBf16), tiling).ring);
  const oproj::Tile fallback = oproj::tile_for(key(128, 128, regimes[1]), tiling);
  CHECK((!fallback.ring && fallback.bn == 64 && fallback.ksplit == 4 && fallback.tm == 1));
  CHECK_FALSE(oproj::tile_for(key(128, 128, regimes[0], WeightFormat::kBf16, OutDtype::kBf16, "sm_89"), tiling).ring);
  CHECK(oproj::tile_for(key(128, 128, regimes[0], WeightFormat::kBf16, OutDtype::kBf16, "sm_100a"), tiling).ring);

  // Past M = 16 a 128-thread ring takes two 16-row tiles a unit: 32 x 32 partial sums per warp
  // row, TM = 2 in the source.
  const Tiling two(oproj::parse_tile_override("1-16:32x8x1,17-32:ring:32x4x3,33-8192:wg:10"));
  const Key k32 = key(128, 128, oproj::regimes(two)[1]);
  const oproj::Tile t2 = oproj::tile_for(k32, two);
  CHECK((t2.ring && t2.tm == 2 && t2.bm() == 32 && t2.threads() == 128));
  CHECK(t2.smem_bytes(k32) == 3 * 32 * 1024 + 4 * 32 * 32 * 4);
  const oproj::RenderedSource r2 = oproj::render(k32, two);
  CHECK(r2.source.find("BN = 32, KSPLIT = 4, kStages = 3;\n  static constexpr int TM = 2, kSmemFloor") !=
        std::string::npos);
  CHECK(r2.summary.find("persistent ring, 32x32 units") == 0);
  CHECK(oproj::tile_for(key(128, 128, oproj::regimes(two)[0]), two).tm == 1);
}

TEST_CASE("NVRTC compiles every ring tile that fits two CTAs an SM on sm_90a, and one on other archs") {
  // Each admitted ring (32x4 and 32x8, STAGES 2..4) with bf16 weights, and
  // with FP8 weights (MXFP8 for even stage counts, block FP8 for odd), where it stays a ring;
  // then 32x4x2 on the archs of other families (sm_89 and sm_120a: FP8 only, 100 KB an SM).
  std::vector<oproj::RenderedSource> sources;
  for (const auto& [bn, ksplit] : {std::pair{32, 4}, std::pair{32, 8}})
    for (int stages = 2; stages <= 4; ++stages) {
      const oproj::Tiling tiling(
          oproj::parse_tile_override(fmt::format("1-16:ring:{}x{}x{},17-8192:32x8x2", bn, ksplit, stages)));
      const WeightFormat fp8 = stages % 2 == 0 ? WeightFormat::kMxfp8 : WeightFormat::kFp8Block128;
      for (const auto& [w, out] : {std::pair{WeightFormat::kBf16, OutDtype::kBf16}, std::pair{fp8, OutDtype::kE4m3}}) {
        const Key k = key(128, 256, {1, 16}, w, out);
        if (oproj::tile_for(k, tiling).ring) sources.push_back(oproj::render(k, tiling));
      }
    }
  // bf16: 32x4 and 32x8 at two and three slots; FP8: every one.
  CHECK(sources.size() == 4 + 6);
  // Two 16-row tiles a unit (M 17-32), 128 threads only: bf16 at two and three slots, FP8 at
  // two to four.
  for (int stages = 2; stages <= 4; ++stages) {
    const oproj::Tiling tiling(
        oproj::parse_tile_override(fmt::format("1-16:32x8x1,17-32:ring:32x4x{},33-8192:32x8x2", stages)));
    for (const auto& [w, out] : {std::pair{WeightFormat::kBf16, OutDtype::kE4m3},
                                 std::pair{WeightFormat::kMxfp8, OutDtype::kBf16}}) {
      const Key k = key(128, 256, {17, 32}, w, out);
      if (oproj::tile_for(k, tiling).ring) sources.push_back(oproj::render(k, tiling));
    }
  }
  CHECK(sources.size() == 4 + 6 + 5);
  const oproj::Tiling small(oproj::parse_tile_override("1-16:ring:32x4x2,17-8192:32x8x2"));
  for (const char* arch : {"sm_80", "sm_89", "sm_100a", "sm_120a"})
    for (const auto& [w, out] : {std::pair{WeightFormat::kBf16, OutDtype::kBf16},
                                 std::pair{WeightFormat::kFp8Block128, OutDtype::kE4m3}}) {
      const Key k = key(16, 128, {1, 16}, w, out, arch);
      const bool hundred_kb = std::string(arch) == "sm_89" || std::string(arch) == "sm_120a";
      CAPTURE(k.name());
      CHECK(oproj::tile_for(k, small).ring == (w != WeightFormat::kBf16 || !hundred_kb));
      if (oproj::tile_for(k, small).ring) sources.push_back(oproj::render(k, small));
    }
  CHECK(sources.size() == 4 + 6 + 5 + 6);
  compile_each(sources, [](const oproj::RenderedSource& s, const CompiledKernel& c) {
    CHECK(2 * s.threads * c.resources.registers <= 65536);  // two CTAs an SM
  });
}

TEST_CASE("NVRTC compiles every tile the override admits on sm_90a, without spills") {
  // Every BN x KSPLIT x TM that parse_tile_override admits, with bf16 and FP8 weights and each
  // output; V = 256 so that BN = 128 spans two column blocks.
  std::vector<oproj::RenderedSource> sources;
  for (int bn : {32, 64, 128})
    for (int ksplit : {4, 8, 16})
      for (int tm = 1; tm <= 4; ++tm) {
        oproj::Tiling tiling;
        try {
          tiling = oproj::Tiling(oproj::parse_tile_override(fmt::format("1-8192:{}x{}x{}", bn, ksplit, tm)));
        } catch (const Error&) {
          continue;  // a tile the override refuses (too many threads, or registers at 512)
        }
        for (const auto& [w, out] : {std::pair{WeightFormat::kBf16, OutDtype::kBf16},
                                     std::pair{WeightFormat::kMxfp8, OutDtype::kE4m3}})
          sources.push_back(oproj::render(key(8, 256, {1, 8192}, w, out), tiling));
      }
  CHECK(sources.size() == 2 * 20);  // 24 tiles within 512 threads, 4 of them refused at 512
  compile_each(sources, [](const oproj::RenderedSource&, const CompiledKernel&) {});
}

TEST_CASE("NVRTC compiles the stationary kernel's decode form for every format and output, at any ring depth") {
  // The auto schedule takes it only for bf16 weights from 64 blocks; the override reaches the
  // rest (FP8 weights stored before the wait) and the smallest ring that must still hold the
  // o tile's blocks.
  std::vector<oproj::RenderedSource> sources;
  for (const char* table : {"1-16:wg:3,17-8192:wg:10", "1-16:wg:10,17-8192:wg:10"})
    for (int v : {128, 256})
      for (WeightFormat w : kWeightFormats)
        for (OutDtype out : {OutDtype::kBf16, OutDtype::kE4m3}) {
          sources.push_back(oproj::render(key(8, v, {1, 16}, w, out), oproj::Tiling(oproj::parse_tile_override(table))));
          REQUIRE(sources.back().source.find("kDecode = true") != std::string::npos);
        }
  compile_each(sources, [](const oproj::RenderedSource&, const CompiledKernel& c) { CHECK(c.resources.local_bytes == 0); });
}

TEST_CASE("oproj tiled decode keeps FP8 weights in shared memory, leaving room for the next kernel's CTAs") {
  const std::vector<MRegime> r = oproj::regimes(oproj::Schedule::kTiled);
  for (const ArchInfo& a : supported_archs())
    for (WeightFormat w : {WeightFormat::kBf16, WeightFormat::kMxfp8, WeightFormat::kFp8Block128})
      for (int heads : {1, 8, 16, 64, 128})
        for (int v : {128, 256}) {
          const bool fp8 = w != WeightFormat::kBf16;
          const Key dec = key(heads, v, r[0], w, OutDtype::kE4m3, std::string(a.name).c_str());
          const Key past = key(heads, v, r[3], w, OutDtype::kE4m3, std::string(a.name).c_str());
          const oproj::Tile t = oproj::tile_for(dec, oproj::Schedule::kTiled);
          const oproj::Tile t2 = oproj::tile_for(past, oproj::Schedule::kTiled);
          CAPTURE(dec.name());
          REQUIRE((t.tm == 1 && t2.tm == 2 && !t.ring && !t2.ring));
          // Decode: every warp row's partial sums, and FP8 also BN rows of L weight bytes.
          CHECK(t.smem_bytes(dec) == t.ksplit * t.bm() * t.bn * 4 + (fp8 ? t.bn * 512 : 0));
          // Two M tiles a warp keep their weights in registers.
          CHECK(t2.smem_bytes(past) == t2.ksplit * t2.bm() * t2.bn * 4);
        }
  // At 128 heads an FP8 decode CTA (256 threads) takes at most 64 registers a lane and a
  // quarter of the SM's shared memory: four fit an SM, two of this layer's and two of the next.
  for (WeightFormat w : {WeightFormat::kMxfp8, WeightFormat::kFp8Block128})
    for (OutDtype out : {OutDtype::kBf16, OutDtype::kE4m3}) {
      const Key k = key(128, 128, r[0], w, out);
      const oproj::RenderedSource src = oproj::render(k, oproj::Schedule::kTiled);
      CAPTURE(src.key);
      REQUIRE(src.threads == 256);
      const CompiledKernel c = compile(src);
      CHECK(c.resources.spill_bytes == 0);
      CHECK(c.resources.registers <= 64);
      CHECK(4 * (src.smem_bytes + 1024) <= arch_info("sm_90a").max_smem_per_block + 1024);
    }
}

TEST_CASE("SPARK_OPROJ_TILES pre-converted tiles: FP8 decode dequantised before the wait, two CTAs an SM") {
  using oproj::Tiling;
  const Tiling tiling(oproj::parse_tile_override("1-16:pre:128x2x4,17-8192:wg:10"));
  const std::vector<MRegime> regimes = oproj::regimes(tiling);
  REQUIRE(regimes.size() == 2);
  const Key block = key(128, 128, regimes[0], WeightFormat::kFp8Block128, OutDtype::kBf16);
  const oproj::Tile t = oproj::tile_for(block, tiling);
  CHECK((t.pre && !t.ring && !t.stationary && t.bn == 128 && t.ksplit == 2 && t.reg_chunks == 4 && !t.first));
  CHECK((t.threads() == 256 && t.bm() == 16));
  // Four of a lane's eight chunks as bf16 in shared memory (64 KB), the other four's FP8
  // staging (32 KB, which the 16 KB of partial sums reuse) and two scale words a row of the
  // lane's (8 KB): 104 KB, two CTAs (with 1 KB each) within sm_90a's 228 KB.
  CHECK(t.smem_bytes(block) == 4 * 4 * 256 * 16 + 4 * 4 * 256 * 8 + 4 * 2 * 256 * 4);
  CHECK(2 * (t.smem_bytes(block) + 1024) <= arch_info("sm_90a").max_smem_per_block + 1024);
  const oproj::RenderedSource r = oproj::render(block, tiling);
  CHECK(r.source.find("#include \"mla_oproj_pre.cuh\"") != std::string::npos);
  CHECK(r.source.find("BN = 128, KSPLIT = 2, kRegChunks = 4;\n  static constexpr bool kTriggerFirst = false;") !=
        std::string::npos);
  CHECK(r.source.find("__launch_bounds__(256, 2)") != std::string::npos);
  CHECK(r.smem_bytes == t.smem_bytes(block));
  CHECK(r.summary.find("pre-converted FP8 decode, 16x128 CTA tile") == 0);
  // "f": the next kernel released at entry.
  const Tiling first(oproj::parse_tile_override("1-16:pre:64x4x4f,17-8192:wg:10"));
  const oproj::Tile tf = oproj::tile_for(key(64, 256, {1, 16}, WeightFormat::kMxfp8, OutDtype::kE4m3), first);
  CHECK((tf.pre && tf.first && tf.bn == 64 && tf.ksplit == 4 && tf.reg_chunks == 4));
  CHECK(oproj::render(key(64, 256, {1, 16}, WeightFormat::kMxfp8, OutDtype::kE4m3), first)
            .source.find("kTriggerFirst = true") != std::string::npos);
  // bf16 weights, and an arch where two such CTAs do not fit an SM, take the built-in tiled tile.
  for (const Key& k : {key(128, 128, regimes[0]),
                       key(128, 128, regimes[0], WeightFormat::kMxfp8, OutDtype::kBf16, "sm_89")}) {
    CAPTURE(k.name());
    const oproj::Tile fallback = oproj::tile_for(k, tiling);
    CHECK((!fallback.pre && !fallback.ring && !fallback.stationary && fallback.tm == 1));
  }
  CHECK(oproj::tile_for(key(128, 128, regimes[0], WeightFormat::kMxfp8, OutDtype::kBf16, "sm_100a"), tiling).pre);

  const std::vector<std::pair<const char*, const char*>> bad = {
      {"1-32:pre:128x2x4,33-8192:wg:10", "a pre-converted tile serves decode only"},
      {"1-16:pre:128x8x1,17-8192:wg:10", "KSPLIT must be 1, 2 or 4"},
      {"1-16:pre:96x2x4,17-8192:wg:10", "BN must be 32, 64 or 128"},
      {"1-16:pre:128x4x5,17-8192:wg:10", "REG must be at most a lane's 4 L chunks"},
      {"1-16:pre:128x4x1,17-8192:wg:10", "more than the 64 that two CTAs of 512 threads leave"},
      {"1-16:pre:32x1x11,17-8192:wg:10", "more than the 224 that two CTAs of 32 threads leave"},
      {"1-16:pre:128x4x0,17-8192:wg:10", "163840 bytes of shared memory, more than the 115712 of half an sm_90a SM"},
      {"1-16:pre:128x2,17-8192:wg:10", "expected 'x' at its end"},
      {"1-16:pre:128x2x4g,17-8192:wg:10", "expected the end of the item"},
  };
  for (const auto& [text, rule] : bad) {
    const std::string item = text;
    CAPTURE(item);
    CHECK_THROWS_WITH_AS(oproj::parse_tile_override(text), doctest::Contains("SPARK_OPROJ_TILES"), Error);
    CHECK_THROWS_WITH_AS(oproj::parse_tile_override(text), doctest::Contains(rule), Error);
  }
}

TEST_CASE("NVRTC compiles every pre-converted tile the override admits on sm_90a, without spills") {
  // Every BN x KSPLIT x REG the parser admits (the next kernel released past the wait; "f" at
  // each shape's largest REG), block FP8 with bf16 output and MXFP8 with e4m3 output.
  std::vector<oproj::RenderedSource> sources;
  int tiles = 0;
  for (int bn : {32, 64, 128})
    for (int ksplit : {1, 2, 4})
      for (int reg = 0; reg <= 512 / ksplit / 32; ++reg)
        for (const char* first : {"", "f"}) {
          oproj::Tiling tiling;
          try {
            tiling = oproj::Tiling(
                oproj::parse_tile_override(fmt::format("1-16:pre:{}x{}x{}{},17-8192:wg:10", bn, ksplit, reg, first)));
          } catch (const Error&) {
            continue;  // a tile the override refuses (registers, or shared memory for two CTAs an SM)
          }
          const bool widest = [&] {
            try {
              oproj::parse_tile_override(fmt::format("1-16:pre:{}x{}x{},17-8192:wg:10", bn, ksplit, reg + 1));
              return false;
            } catch (const Error&) {
              return true;
            }
          }();
          if (*first && !widest) continue;
          ++tiles;
          for (const auto& [w, out] : {std::pair{WeightFormat::kFp8Block128, OutDtype::kBf16},
                                       std::pair{WeightFormat::kMxfp8, OutDtype::kE4m3}}) {
            const Key k = key(8, 256, {1, 16}, w, out);
            REQUIRE(oproj::tile_for(k, tiling).pre);
            sources.push_back(oproj::render(k, tiling));
          }
        }
  // At BN 32 and 64: REG 0..10 (KSPLIT 1, by registers), 0..8 (2), 0..4 (4) (a lane's chunks); at BN 128 the
  // chunks left in shared memory must fit half an SM: REG 6..10 (KSPLIT 1), 3..4 (2), none at
  // KSPLIT 4 (512 threads, no register chunks); and one "f" tile per shape.
  CHECK(tiles == 2 * (11 + 9 + 5) + 5 + 2 + 8);
  CHECK(sources.size() == 2 * static_cast<size_t>(tiles));
  compile_each(sources, [](const oproj::RenderedSource&, const CompiledKernel& c) { CHECK(c.resources.local_bytes == 0); });
}

TEST_CASE("a stationary launch's M chunks: rounds of a tile a team, or one team's where that fills idle SMs") {
  oproj::Tile one, two;
  one.stationary = two.stationary = true;
  two.groups = 2;
  const auto chunks = [](const oproj::Tile& t, WeightFormat w, long long blocks, long long tiles) {
    return oproj::stationary_chunks(t, w, blocks, tiles, 132);
  };
  for (WeightFormat w : {WeightFormat::kBf16, WeightFormat::kMxfp8, WeightFormat::kFp8Block128}) {
    CAPTURE(static_cast<int>(w));
    const bool bf16 = w == WeightFormat::kBf16;
    // One team: the plain count (16 blocks at M = 1024: eight chunks of two tiles).
    CHECK(chunks(one, w, 16, 16) == spark::stationary_m_chunks(16, 16, 132));
    CHECK(chunks(one, w, 16, 16) == 8);
    // 32 blocks at M = 256 (four tiles): 64 CTAs of a round, not 128 with a team idle.
    CHECK(chunks(two, w, 32, 4) == 2);
    // 32 blocks at M = 768 (12 tiles): rounds give 96 CTAs of four tiles; with bf16 weights
    // 128 of three, as one team would run (FP8 weights: each CTA dequantises its slice).
    CHECK(chunks(two, w, 32, 12) == (bf16 ? 4 : 3));
    // Where the rounds give more CTAs, they stay: 88 blocks at M = 512.
    CHECK(chunks(two, w, 88, 8) == 4);
    // A full device keeps a block's tiles together: H = 128, V = 128 at M = 4096.
    CHECK(chunks(two, w, 128, 64) == 1);
    // Never more chunks than tiles, never an empty chunk.
    for (long long blocks : {1, 8, 22, 32, 44, 128, 256})
      for (long long tiles : {1, 2, 3, 7, 12, 16, 128}) {
        const long long c = chunks(two, w, blocks, tiles);
        CHECK((c >= 1 && c <= tiles));
        CHECK((c - 1) * ((tiles + c - 1) / c) < tiles);
      }
  }
}


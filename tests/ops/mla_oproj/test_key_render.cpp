#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "core/cubin_elf.h"
#include "core/error.h"
#include "core/key_name.h"
#include "jit/arch.h"
#include "jit/compile.h"
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
  CHECK(a.threads == a.tile.threads());
  CHECK(a.smem_bytes == a.tile.smem_bytes());
  CHECK(oproj::render(key(8, 256, regimes.back(), WeightFormat::kMxfp8, OutDtype::kE4m3)).source != a.source);
  CHECK(oproj::render(key(8, 128, regimes.front(), WeightFormat::kMxfp8, OutDtype::kE4m3)).source != a.source);

  // Outside the op: refused with the reason.
  CHECK_THROWS_WITH_AS(oproj::render(key(8, 192, regimes.front())), doctest::Contains("v_head_dim"), Error);
  CHECK_THROWS_WITH_AS(oproj::render(key(129, 128, regimes.front())), doctest::Contains("heads"), Error);
  CHECK_THROWS_WITH_AS(oproj::render(key(8, 128, {1, 7})), doctest::Contains("regimes"), Error);
  CHECK_THROWS_AS(oproj::render(key(8, 128, regimes.front(), WeightFormat::kBf16, OutDtype::kBf16, "sm_75")),
                  Error);
}

TEST_CASE("NVRTC compiles every oproj kernel shape on every arch, without spills") {
  // Each distinct (arch, tile, V, weights, output): the tile depends on heads (narrow or
  // wide CTAs) and the regime.
  std::vector<Key> keys;
  std::vector<std::string> seen;
  for (const ArchInfo& a : supported_archs())
    for (int heads : {8, 128})
      for (int v : {128, 256})
        for (WeightFormat w : kWeightFormats)
          for (OutDtype out : {OutDtype::kBf16, OutDtype::kE4m3})
            for (const MRegime& r : oproj::regimes()) {
              // Every arch compiles bf16 in and out; the conversions' two paths (sm_80's
              // software e4m3, sm_89+'s instructions) on sm_80, sm_90a and sm_120a.
              const bool converting = w != WeightFormat::kBf16 || out != OutDtype::kBf16;
              if (converting && a.name != "sm_80" && a.name != "sm_90a" && a.name != "sm_120a") continue;
              const Key k = key(heads, v, r, w, out, std::string(a.name).c_str());
              const oproj::Tile t = oproj::tile_for(k);
              const std::string id = std::string(a.name) + t.describe() + std::to_string(v) +
                                     std::string(to_string(w)) + std::string(to_string(out));
              if (std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
              seen.push_back(id);
              keys.push_back(k);
            }
  MESSAGE(keys.size() << " distinct oproj kernels");
  const size_t width = std::clamp<size_t>(std::thread::hardware_concurrency(), 2, 8);
  for (size_t first = 0; first < keys.size(); first += width) {
    std::vector<std::future<CompiledKernel>> jobs;
    for (size_t i = first; i < std::min(keys.size(), first + width); ++i)
      jobs.push_back(std::async(std::launch::async, [k = keys[i]] { return compile(oproj::render(k)); }));
    for (size_t i = 0; i < jobs.size(); ++i) {
      CAPTURE(keys[first + i].name());
      const CompiledKernel c = jobs[i].get();
      CHECK(is_elf(c.cubin));
      CHECK(cubin_problem(c.cubin, keys[first + i].arch, oproj::kKernelEntryName) == "");
      CHECK(c.resources.registers > 0);
      CHECK(c.resources.spill_bytes == 0);
    }
  }
}

#include <doctest/doctest.h>

#include "core/error.h"
#include "jit/templates.h"
#include "ops/mla_qproj/render.h"

using namespace spark;

namespace {
KernelKey key(int heads, int k, MRegime regime, OutDtype out, const char* arch = "sm_90a") {
  return KernelKey::of(heads, k, regime, WeightFormat::kBf16, out, arch);
}
}  // namespace

TEST_CASE("the same key renders byte-identical source that starts with the key") {
  const KernelKey k = key(8, 192, {1, 16}, OutDtype::kE4m3);
  const RenderedSource a = render(k);
  const RenderedSource b = render(KernelKey::parse(k.name()));
  CHECK(a.source == b.source);
  CHECK(a.source.rfind("// spark kernel " + k.name() + "\n", 0) == 0);
  CHECK(a.source.find("#include \"mla_qproj.cuh\"") != std::string::npos);
  CHECK(a.threads == a.tile.threads());
  CHECK(a.smem_bytes == a.tile.smem_bytes(192, OutDtype::kE4m3, WeightFormat::kBf16));
  // Different keys, different sources.
  CHECK(render(key(8, 192, {1, 16}, OutDtype::kBf16)).source != a.source);
  CHECK(render(key(8, 128, {1, 16}, OutDtype::kE4m3)).source != a.source);
  CHECK(render(key(8, 192, {17, 32}, OutDtype::kE4m3)).source != a.source);
  // Some sm_90a kernels keep their weights in shared memory: on mma.sync (32 heads at
  // M = 17..32), or on warp-group MMAs (large M); sm_100a has no wgmma.
  const RenderedSource ws = render(key(32, 192, {17, 32}, OutDtype::kE4m3));
  CHECK(ws.tile.stationary);
  CHECK_FALSE(ws.tile.wgmma);
  CHECK(ws.source.find("#include \"mla_qproj_ws.cuh\"") != std::string::npos);
  CHECK(ws.source.find("mla_qproj_ws<Config>") != std::string::npos);
  CHECK(ws.smem_bytes == ws.tile.smem_bytes(192, OutDtype::kE4m3, WeightFormat::kBf16));
  const RenderedSource wg = render(key(32, 192, {513, 8192}, OutDtype::kE4m3));
  CHECK(wg.tile.wgmma);
  CHECK(wg.source.find("#include \"mla_qproj_wg.cuh\"") != std::string::npos);
  CHECK(wg.source.find("mla_qproj_wg<Config>") != std::string::npos);
  CHECK(wg.threads == 256);
  CHECK(wg.source.find("kNSplit = 1;") != std::string::npos);
  CHECK(wg.smem_bytes == wg.tile.smem_bytes(192, OutDtype::kE4m3, WeightFormat::kBf16));
  // MXFP8 with e4m3 output there: each 64 x 256 tile split over a team of two warp groups.
  KernelKey split = key(32, 192, {513, 8192}, OutDtype::kE4m3);
  split.weights = WeightFormat::kMxfp8;
  const RenderedSource sp = render(split);
  CHECK(sp.tile.nsplit == 2);
  CHECK(sp.threads == 512);
  CHECK(sp.source.find("kNSplit = 2;") != std::string::npos);
  CHECK(sp.smem_bytes == sp.tile.smem_bytes(192, OutDtype::kE4m3, WeightFormat::kMxfp8));
  // Decode at 64 heads and K = 128 copies its bf16 weights by a flat index loop.
  const RenderedSource flat = render(key(64, 128, {1, 16}, OutDtype::kBf16));
  CHECK(flat.tile.flat_copies);
  CHECK(flat.source.find("kFlatCopies = true;") != std::string::npos);
  CHECK(render(key(128, 128, {1, 16}, OutDtype::kBf16)).source.find("kFlatCopies = false;") != std::string::npos);
  const RenderedSource b100 = render(key(8, 192, {129, 8192}, OutDtype::kE4m3, "sm_100a"));
  CHECK(b100.tile.stationary);
  CHECK_FALSE(b100.tile.wgmma);
  KernelKey mx = k;
  mx.weights = WeightFormat::kMxfp8;
  const RenderedSource m = render(mx);
  CHECK(m.source != a.source);
  CHECK(m.source.find("kWeights = spark::WeightKind::kMxfp8;") != std::string::npos);
  // MXFP8 tiles keep the raw bytes (one per weight) and dequantise in registers.
  CHECK(m.smem_bytes < a.smem_bytes);
  CHECK(m.tile.wn % 32 == 0);
  // Block FP8 runs MXFP8's tile with its own scale words: same tile and shared memory,
  // a different kernel.
  KernelKey blk = mx;
  blk.weights = WeightFormat::kFp8Block128;
  const RenderedSource bs = render(blk);
  CHECK(bs.source.find("kWeights = spark::WeightKind::kFp8Block128;") != std::string::npos);
  CHECK(bs.summary == m.summary);
  CHECK(bs.smem_bytes == m.smem_bytes);
  CHECK(bs.source != m.source);
  CHECK(bs.key == "mla_qproj.h8.k192.n512.r64.m1-16.wfp8-block.oe4m3.sm_90a");
  // Few heads at K = 128 stream their FP8 weights through registers; bf16 weights cannot.
  KernelKey few = key(16, 128, {1, 16}, OutDtype::kBf16);
  few.weights = WeightFormat::kFp8Block128;
  const RenderedSource rs = render(few);
  CHECK(rs.tile.streamed);
  CHECK(rs.source.find("#include \"mla_qproj_rs.cuh\"") != std::string::npos);
  CHECK(rs.source.find("spark::mla_qproj_rs<Config>(params);") != std::string::npos);
  CHECK(rs.threads == 128);
}

TEST_CASE("templates are embedded with their bytes and digested") {
  const auto& t = embedded_templates();
  REQUIRE(t.size() >= 2);
  bool found = false;
  for (const auto& e : t) {
    CHECK(!e.bytes.empty());
    if (e.name == "mla_qproj_params.h") {
      found = true;
      CHECK(e.bytes.find("struct MlaQprojParams") != std::string_view::npos);
    }
  }
  CHECK(found);
  CHECK(templates_digest().size() == 32);
}

TEST_CASE("unsupported keys are refused before rendering") {
  auto status_of = [](const KernelKey& k) {
    try {
      render(k);
    } catch (const Error& e) {
      return e.status();
    }
    return SPARK_SUCCESS;
  };
  CHECK(status_of(key(0, 192, {1, 16}, OutDtype::kBf16)) == SPARK_ERROR_UNSUPPORTED);
  CHECK(status_of(key(129, 192, {1, 16}, OutDtype::kBf16)) == SPARK_ERROR_UNSUPPORTED);
  CHECK(status_of(key(8, 64, {1, 16}, OutDtype::kBf16)) == SPARK_ERROR_UNSUPPORTED);
  CHECK(status_of(key(8, 192, {1, 17}, OutDtype::kBf16)) == SPARK_ERROR_UNSUPPORTED);  // not a regime
  CHECK(status_of(key(8, 192, {1, 16}, OutDtype::kBf16, "sm_75")) == SPARK_ERROR_UNSUPPORTED);
}

#include "ops/mla_oproj/render.h"

#include "core/error.h"
#include "jit/arch.h"

namespace spark::oproj {

std::string Tile::describe() const {
  return fmt::format("{}x{} CTA tile, {} warps along L, {} threads", bm(), bn, ksplit, threads());
}

const std::vector<MRegime>& regimes() {
  // Decode keeps one 16-row tile per warp; beyond it two, so each weight fragment serves 32
  // rows.  (A first cut: the large-M schedule is still to come.)
  static const std::vector<MRegime> table{{1, 16}, {17, kMaxM}};
  return table;
}

std::vector<MRegime> regimes_up_to(int max_m) {
  std::vector<MRegime> out;
  for (const MRegime& r : regimes())
    if (r.m_min <= max_m) out.push_back(r);
  return out;
}

Tile tile_for(const Key& key) {
  Tile t;
  // Few heads: 32-column CTAs (eight warps along L) so more CTAs share the weight read;
  // many heads fill the machine with 64-column CTAs (four along L).
  const bool narrow = key.v == 128 ? key.heads < 32 : key.heads < 16;
  t.bn = narrow ? 32 : 64;
  t.ksplit = narrow ? 8 : 4;
  t.tm = key.regime.m_max <= 16 ? 1 : 2;
  return t;
}

RenderedSource render(const Key& key) {
  const std::string shape = shape_problem(key.heads, key.l, key.v);
  SPARK_CHECK(shape.empty(), SPARK_ERROR_UNSUPPORTED, "kernel key '{}': {}", key.name(), shape);
  bool known_regime = false;
  for (const MRegime& r : regimes()) known_regime = known_regime || r == key.regime;
  SPARK_CHECK(known_regime, SPARK_ERROR_UNSUPPORTED, "kernel key '{}': M {}-{} is not one of mla_oproj's regimes",
              key.name(), key.regime.m_min, key.regime.m_max);
  const ArchInfo& arch = arch_info(key.arch);  // throws UNSUPPORTED for an arch spark does not target

  RenderedSource r;
  r.op_key = key;
  r.tile = tile_for(key);
  r.key = key.name();
  r.arch = key.arch;
  r.generator_version = kGeneratorVersion;
  r.summary = r.tile.describe();
  r.threads = r.tile.threads();
  r.smem_bytes = r.tile.smem_bytes();
  SPARK_CHECK(r.smem_bytes <= arch.max_smem_per_block, SPARK_ERROR_UNSUPPORTED,
              "kernel key '{}': tile needs {} bytes of shared memory, {} allows {}", r.key, r.smem_bytes, key.arch,
              arch.max_smem_per_block);
  const char* out = key.out == OutDtype::kBf16 ? "spark::OprojOut::kBf16" : "spark::OprojOut::kE4m3";
  const char* weights = key.weights == WeightFormat::kBf16    ? "spark::OprojWeights::kBf16"
                        : key.weights == WeightFormat::kMxfp8 ? "spark::OprojWeights::kMxfp8"
                                                              : "spark::OprojWeights::kFp8Block128";
  r.source = fmt::format(
      "// spark kernel {key}\n"
      "// generator v{gen}; tile {tile}; dynamic shared memory {smem} bytes\n"
      "#include \"mla_oproj.cuh\"\n"
      "\n"
      "struct Choices {{\n"
      "  static constexpr int V = {v}, L = {l};\n"
      "  static constexpr int BN = {bn}, KSPLIT = {ksplit}, TM = {tm};\n"
      "  static constexpr spark::OprojOut kOut = {out};\n"
      "  static constexpr spark::OprojWeights kWeights = {weights};\n"
      "}};\n"
      "using Config = spark::MlaOprojConfig<Choices>;\n"
      "static_assert(Config::kThreads == {threads}, \"host and template disagree on threads\");\n"
      "static_assert(Config::kSmemBytes == {smem}, \"host and template disagree on shared memory\");\n"
      "\n"
      "extern \"C\" __global__ void __launch_bounds__({threads}) {entry}(const spark::MlaOprojParams params) {{\n"
      "  spark::mla_oproj<Config>(params);\n"
      "}}\n",
      fmt::arg("key", r.key), fmt::arg("gen", kGeneratorVersion), fmt::arg("tile", r.summary),
      fmt::arg("smem", r.smem_bytes), fmt::arg("v", key.v), fmt::arg("l", key.l), fmt::arg("bn", r.tile.bn),
      fmt::arg("ksplit", r.tile.ksplit), fmt::arg("tm", r.tile.tm), fmt::arg("out", out),
      fmt::arg("weights", weights), fmt::arg("threads", r.threads), fmt::arg("entry", kKernelEntryName));
  return r;
}

}  // namespace spark::oproj

#include "ops/mla_qproj/render.h"

#include "core/error.h"

namespace spark {

TileConfig check_key_supported(const KernelKey& key) {
  SPARK_CHECK(key.op == "mla_qproj", SPARK_ERROR_UNSUPPORTED, "op '{}' is not supported", key.op);
  const std::string shape = shape_problem(key.heads, key.k, key.n, key.r);
  SPARK_CHECK(shape.empty(), SPARK_ERROR_UNSUPPORTED, "{}", shape);
  const ArchInfo& arch = arch_info(key.arch);
  const TileConfig tile = tile_config(key);
  SPARK_CHECK(!tile.wgmma || key.arch == "sm_90a", SPARK_ERROR_UNSUPPORTED,
              "kernel key '{}': wgmma tiles ({}) need sm_90a", key.name(), tile.describe());
  SPARK_CHECK(!tile.streamed || is_fp8(key.weights), SPARK_ERROR_UNSUPPORTED,
              "kernel key '{}': register-streamed tiles ({}) need FP8 weights", key.name(), tile.describe());
  SPARK_CHECK(!is_fp8(key.weights) || tile.stationary || tile.wn % 32 == 0, SPARK_ERROR_UNSUPPORTED,
              "kernel key '{}': FP8 per-tile kernels need a warp tile N that is a multiple of 32 ({})",
              key.name(), tile.describe());
  SPARK_CHECK(tile.smem_bytes(key.k, key.out, key.weights) <= arch.max_smem_per_block, SPARK_ERROR_UNSUPPORTED,
              "kernel key '{}': tile needs {} bytes of shared memory, {} allows {}", key.name(),
              tile.smem_bytes(key.k, key.out, key.weights), key.arch, arch.max_smem_per_block);
  return tile;
}

RenderedSource render(const KernelKey& key) {
  RenderedSource r;
  r.tile = check_key_supported(key);
  r.key = key.name();
  r.arch = key.arch;
  r.generator_version = kGeneratorVersion;
  r.op_key = key;
  r.summary = r.tile.describe();
  r.threads = r.tile.threads();
  r.smem_bytes = r.tile.smem_bytes(key.k, key.out, key.weights);
  const TileConfig& t = r.tile;
  // The family's named choices, then the layout its config template derives from them.
  const char* out = key.out == OutDtype::kBf16 ? "spark::OutKind::kBf16" : "spark::OutKind::kE4m3";
  const char* weights = key.weights == WeightFormat::kBf16    ? "spark::WeightKind::kBf16"
                        : key.weights == WeightFormat::kMxfp8 ? "spark::WeightKind::kMxfp8"
                                                              : "spark::WeightKind::kFp8Block128";
  const std::string kinds = fmt::format(
      "  static constexpr spark::OutKind kOut = {};\n"
      "  static constexpr spark::WeightKind kWeights = {};\n",
      out, weights);
  std::string config;
  if (t.streamed) {
    config = fmt::format(
        "#include \"mla_qproj_rs.cuh\"\n"
        "\n"
        "struct Choices {{\n"
        "  static constexpr int K = {}, N = {}, R = {};\n"
        "  static constexpr int BN = {}, KSPLIT = {};\n"
        "{}"
        "}};\n"
        "using Config = spark::MlaQprojRsConfig<Choices>;\n",
        key.k, key.n, key.r, t.bn, t.ksplit, kinds);
  } else if (t.wgmma) {
    config = fmt::format(
        "#include \"mla_qproj_wg.cuh\"\n"
        "\n"
        "struct Choices {{\n"
        "  static constexpr int K = {}, N = {}, R = {};\n"
        "  static constexpr int BN = {}, kGroups = {}, kQStages = {}, kNSplit = {};\n"
        "{}"
        "}};\n"
        "using Config = spark::MlaQprojWgConfig<Choices>;\n",
        key.k, key.n, key.r, t.bn, t.groups, t.stages, t.nsplit, kinds);
  } else if (t.stationary) {
    config = fmt::format(
        "#include \"mla_qproj_ws.cuh\"\n"
        "\n"
        "struct Choices {{\n"
        "  static constexpr int K = {}, N = {}, R = {};\n"
        "  static constexpr int BM = {}, BN = {}, WM = {}, WN = {}, kQStages = {};\n"
        "{}"
        "}};\n"
        "using Config = spark::MlaQprojWsConfig<Choices>;\n",
        key.k, key.n, key.r, t.bm, t.bn, t.wm, t.wn, t.stages, kinds);
  } else {
    config = fmt::format(
        "#include \"mla_qproj.cuh\"\n"
        "\n"
        "struct Choices {{\n"
        "  static constexpr int K = {}, N = {}, R = {};\n"
        "  static constexpr int BM = {}, BN = {}, WM = {}, WN = {}, KSPLIT = {};\n"
        "  static constexpr int KCHUNK = {}, RING = {};\n"
        "  static constexpr bool kFlatCopies = {};\n"
        "{}"
        "}};\n"
        "using Config = spark::MlaQprojTileConfig<Choices>;\n",
        key.k, key.n, key.r, t.bm, t.bn, t.wm, t.wn, t.ksplit, t.kchunk, t.ring, t.flat_copies, kinds);
  }
  const std::string min_blocks = t.min_blocks > 0 ? fmt::format(", {}", t.min_blocks) : "";
  r.source = fmt::format(
      "// spark kernel {key}\n"
      "// generator v{gen}; tile {tile}; dynamic shared memory {smem} bytes\n"
      "{config}"
      "static_assert(Config::kThreads == {threads}, \"host and template disagree on threads\");\n"
      "static_assert(Config::kSmemBytes == {smem}, \"host and template disagree on shared memory\");\n"
      "\n"
      "extern \"C\" __global__ void __launch_bounds__({threads}{min_blocks}) {entry}(const spark::MlaQprojParams params) {{\n"
      "  spark::{function}<Config>(params);\n"
      "}}\n",
      fmt::arg("key", key.name()), fmt::arg("gen", kGeneratorVersion), fmt::arg("tile", t.describe()),
      fmt::arg("smem", r.smem_bytes), fmt::arg("config", config), fmt::arg("threads", r.threads),
      fmt::arg("min_blocks", min_blocks), fmt::arg("entry", kKernelEntryName),
      fmt::arg("function", t.streamed     ? "mla_qproj_rs"
                                  : t.wgmma      ? "mla_qproj_wg"
                                  : t.stationary ? "mla_qproj_ws"
                                                 : "mla_qproj"));
  return r;
}

}  // namespace spark

#include <doctest/doctest.h>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/cubin_elf.h"
#include "jit/compile.h"
#include "ops/mla_qproj/render.h"
#include "ops/mla_qproj/tiles.h"

using namespace spark;

namespace {
KernelKey key(const std::string& arch, MRegime regime, OutDtype out, int k = 192, int heads = 8,
              WeightFormat weights = WeightFormat::kBf16) {
  return KernelKey::of(heads, k, regime, weights, out, arch);
}

bool is_elf(const std::string& b) { return b.size() > 64 && std::memcmp(b.data(), "\x7f" "ELF", 4) == 0; }
}  // namespace

TEST_CASE("NVRTC compiles, without a GPU and without spills, every tile the tables pick on every arch") {
  // Over the benchmark grid the per-head refinements pick among many tiles; compile each
  // distinct (arch, tile, K, weights, output) once, from the first key that picks it, a few
  // at a time.  Block FP8 differs from MXFP8 only in where the scale words come from: its
  // kernels are compiled for sm_90a (where they run) and sm_120a (the other mma.sync kernels).
  std::map<std::string, KernelKey> distinct;
  for (const ArchInfo& a : supported_archs())
    for (int heads : {8, 11, 16, 32, 64, 128})
      for (int k : {128, 192})
        for (WeightFormat w : kWeightFormats)
          for (OutDtype out : {OutDtype::kBf16, OutDtype::kE4m3})
            for (const RegimeEntry& e : regime_table(a.name)) {
              if (w == WeightFormat::kFp8Block128 && a.name != "sm_90a" && a.name != "sm_120a") continue;
              const KernelKey x = key(std::string(a.name), e.regime, out, k, heads, w);
              distinct.emplace(fmt::format("{} {} k{} w{} o{}", a.name, tile_config(x).describe(), k,
                                           static_cast<int>(w), static_cast<int>(out)),
                               x);
            }
  std::vector<KernelKey> keys;
  for (const auto& entry : distinct) keys.push_back(entry.second);
  MESSAGE(keys.size() << " distinct kernels");
  const size_t width = std::clamp<size_t>(std::thread::hardware_concurrency(), 2, 8);
  for (size_t first = 0; first < keys.size(); first += width) {
    std::vector<std::future<CompiledKernel>> jobs;
    for (size_t i = first; i < std::min(keys.size(), first + width); ++i)
      jobs.push_back(std::async(std::launch::async, [k = keys[i]] { return compile(render(k)); }));
    for (size_t i = 0; i < jobs.size(); ++i) {
      CAPTURE(keys[first + i].name());
      const CompiledKernel c = jobs[i].get();
      CHECK(is_elf(c.cubin));
      CHECK(cubin_problem(c.cubin, keys[first + i].arch, kKernelEntryName) == "");
      CHECK(c.resources.registers > 0);
      CHECK(c.resources.spill_bytes == 0);
      CHECK(c.compile_ms > 0);
    }
  }
}

TEST_CASE("every listed arch is one NVRTC targets, compiles a kernel, and is what its GPUs map to") {
  const NvrtcInfo nvrtc = nvrtc_info();
  REQUIRE_MESSAGE(nvrtc.loaded, nvrtc.problem);
  CHECK(nvrtc.version == nvrtc_version());
  for (const ArchInfo& a : supported_archs()) {
    CAPTURE(a.name);
    if (!nvrtc.archs.empty())
      CHECK(std::find(nvrtc.archs.begin(), nvrtc.archs.end(), a.compute_capability) != nvrtc.archs.end());
    // The smallest kernel of each: the decode tile, through real NVRTC.
    const KernelKey k = key(std::string(a.name), regime_table(a.name).front().regime, OutDtype::kBf16);
    const CompiledKernel c = compile(render(k));
    CHECK(cubin_problem(c.cubin, k.arch, kKernelEntryName) == "");
    // A GPU of this compute capability runs the arch-specific target where there is one.
    const std::string mapped = arch_for_compute_capability(a.compute_capability);
    CHECK((mapped == a.name || a.name.back() != 'a'));
  }
  // B300 (10.3), Thor (11.0), Orin (8.7).
  CHECK(arch_for_compute_capability(103) == "sm_103a");
  CHECK(arch_for_compute_capability(110) == "sm_110a");
  CHECK(arch_for_compute_capability(87) == "sm_87");
  CHECK(arch_info("sm_103a").max_smem_per_block == 232448);
  CHECK_THROWS_AS(arch_for_compute_capability(75), Error);
}

TEST_CASE("a failed compile carries the NVRTC log") {
  RenderedSource src = render(key("sm_90a", {1, 16}, OutDtype::kBf16));
  src.source += "\nthis is not C++;\n";
  try {
    compile(src);
    FAIL("compiled");
  } catch (const Error& e) {
    CHECK(e.status() == SPARK_ERROR_COMPILE);
    CHECK(std::string(e.what()).find("error") != std::string::npos);
    CHECK(std::string(e.what()).find(src.key) != std::string::npos);
  }
}

TEST_CASE("registers are read from the cubin itself, agreeing with ptxas") {
  const CompiledKernel c = compile(render(key("sm_90a", {1, 16}, OutDtype::kE4m3)));
  KernelResources from_elf;
  fill_resources_from_cubin(c.cubin, kKernelEntryName, from_elf);
  CHECK(from_elf.registers == c.resources.registers);
  CHECK(from_elf.local_bytes == c.resources.local_bytes);
  CHECK(from_elf.shared_static_bytes >= 0);
  KernelResources none;
  fill_resources_from_cubin("not an elf", kKernelEntryName, none);
  CHECK(none.registers == -1);
}

TEST_CASE("a cubin is checked for its arch and kernel before anyone loads it") {
  const CompiledKernel c = compile(render(key("sm_90a", {1, 16}, OutDtype::kBf16)));
  CHECK(cubin_problem(c.cubin, "sm_90a", kKernelEntryName) == "");
  CHECK(cubin_problem(c.cubin, "sm_100a", kKernelEntryName) == "the cubin is for sm_90, not sm_100a");
  CHECK(cubin_problem(c.cubin, "sm_90a", "another_kernel") == "the cubin has no kernel named another_kernel");
  CHECK(cubin_problem("NOT A CUBIN", "sm_90a", kKernelEntryName).find("not a 64-bit ELF image") != std::string::npos);
  // Cut anywhere, every offset stays inside the bytes (ASan checks the reads).
  for (size_t cut : {size_t{16}, size_t{64}, c.cubin.size() / 2, c.cubin.size() - 64})
    CHECK(cubin_problem(std::string_view(c.cubin).substr(0, cut), "sm_90a", kKernelEntryName) != "");
  std::string x86 = c.cubin;
  x86[18] = 62;  // e_machine: EM_X86_64
  CHECK(cubin_problem(x86, "sm_90a", kKernelEntryName).find("not a CUDA executable") != std::string::npos);
}

TEST_CASE("ptxas resource report parsing") {
  const auto r = parse_ptxas_report(
      "ptxas info    : Function properties for spark_mla_qproj\n"
      "    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 63 registers, used 1 barriers, 24 bytes smem, 400 bytes cmem[0]\n");
  CHECK(r.registers == 63);
  CHECK(r.shared_static_bytes == 24);
  CHECK(r.local_bytes == 16);
  CHECK(r.spill_bytes == 12);
  CHECK(nvrtc_version().find('.') != std::string::npos);
}

TEST_CASE("SPARK_DUMP_DIR keeps every compile's files; one that cannot be made never fails a compile") {
  char tmpl[] = "/tmp/spark-dump-test-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const RenderedSource src = render(key("sm_90a", {1, 16}, OutDtype::kBf16));
  ::setenv("SPARK_DUMP_DIR", dir.c_str(), 1);
  compile(src);
  for (const char* ext : {".cu", ".log", ".ptx"})
    CHECK(std::ifstream(dir + "/" + src.key + ext).good());
  // Below /proc nothing can be created: the compile still succeeds (with one warning).
  ::setenv("SPARK_DUMP_DIR", "/proc/spark-cannot-be-here/dumps", 1);
  CHECK_NOTHROW(compile(src));
  CHECK_NOTHROW(compile(src));
  ::unsetenv("SPARK_DUMP_DIR");
  std::filesystem::remove_all(dir);
}

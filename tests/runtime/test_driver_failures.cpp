// spark's CUDA failure paths, through the public C API, on the fake driver of tests/fake_cuda.
//
// This binary links the fake (soname libcuda.so.1, on this binary's RPATH only), so spark's
// dlopen("libcuda.so.1") returns the very library the test controls (the first case checks
// that).  Each case makes one entry point fail and checks the status, that spark_last_error()
// names the call and the CUresult, that destroying the plan and the context is safe, and
// that the driver's books balance: every module loaded is unloaded, every push popped, every
// primary-context retain released, and nothing the real driver would refuse was asked of it.
// Kernels are compiled by the real NVRTC into a temporary cache: two keys (H 8, K 192, BF16
// weights, BF16 or E4M3 output, M 1-16 on sm_90a), each compiled once per run of the binary;
// the value up-projection's cases (last) add its keys (H 8, V 256, M up to 64).

#include <doctest/doctest.h>

#include <dlfcn.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "fake_cuda_control.h"
#include "fake_problem.h"
#include "ops/common/schedule.h"
#include "ops/mla_oproj/render.h"
#include "ops/mla_qproj/plan.h"
#include "ops/mla_qproj/tiles.h"
#include "spark/spark.h"
#include "templates/mla_oproj_params.h"

extern char** environ;

namespace {

using spark_test::Context;
using spark_test::key_for;
using spark_test::kHeads;
using spark_test::kK;
using spark_test::kMaxM;
using spark_test::kN;
using spark_test::kR;
using spark_test::make_args;
using spark_test::make_desc;
using spark_test::Plan;

namespace fs = std::filesystem;

// ----------------------------------------------------------------------------------------
// The cache: one fresh directory per process, removed at exit.
// ----------------------------------------------------------------------------------------

class TempCache {
 public:
  TempCache() {
    std::string dir = (fs::temp_directory_path() / "spark-fake-cuda-XXXXXX").string();
    if (!::mkdtemp(dir.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    dir_ = dir;
    ::setenv("SPARK_CACHE_DIR", dir_.c_str(), 1);  // read when a context is created
  }
  ~TempCache() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

 private:
  fs::path dir_;
};

void use_temp_cache() { static TempCache cache; }

// ----------------------------------------------------------------------------------------
// The driver's books.
// ----------------------------------------------------------------------------------------

fake_cuda_counters counters() {
  fake_cuda_counters c;
  fake_cuda_get_counters(&c);
  return c;
}

std::string last_misuse() {
  char buf[256];
  fake_cuda_last_misuse(buf, sizeof buf);
  return buf;
}

// A fresh cache and a reset driver for one case; check_balanced() checks the books since then
// (live modules and primary-context references are state: compared with the start).
struct Books {
  Books() {
    use_temp_cache();
    fake_cuda_reset();
    start = counters();
  }

  void check_balanced() const {
    const fake_cuda_counters c = counters();
    CHECK(c.modules_loaded == c.modules_unloaded);
    CHECK(c.live_modules == start.live_modules);
    CHECK(c.pushes == c.pops);
    CHECK(fake_cuda_push_depth() == 0);
    CHECK(c.primary_retains == c.primary_releases);
    CHECK(c.primary_refcount == start.primary_refcount);
    CHECK_MESSAGE(c.misuse == 0, "the driver was misused: ", last_misuse());
  }

  fake_cuda_counters start;
};

// ----------------------------------------------------------------------------------------
// Statuses and messages.
// ----------------------------------------------------------------------------------------

// got == want, and spark_last_error() contains every word.
void check_error(spark_status got, spark_status want, std::initializer_list<std::string> words) {
  const std::string msg = spark_last_error();
  INFO("spark_last_error(): ", msg);
  CHECK_MESSAGE(got == want, "status ", std::string(spark_status_string(got)), ", expected ",
                std::string(spark_status_string(want)));
  for (const std::string& w : words) CHECK_MESSAGE(msg.find(w) != std::string::npos, "no '", w, "' in the message");
}

#define REQUIRE_OK(call)                                \
  do {                                                  \
    const spark_status st_ = (call);                    \
    INFO(#call, ": ", std::string(spark_last_error())); \
    REQUIRE(st_ == SPARK_SUCCESS);                      \
  } while (0)

// ----------------------------------------------------------------------------------------
// Contexts and plans on the fake device (the problem: tests/fake_cuda/fake_problem.h;
// the handles there destroy themselves, a plan declared after its context first).
// ----------------------------------------------------------------------------------------

spark_status create_context(Context& ctx, int device = 0) {
  use_temp_cache();  // never the user's cache
  spark_context_options o{sizeof o, device};
  return spark_context_create(&o, &ctx.h);
}

// ----------------------------------------------------------------------------------------
// The problem's two descriptors and its plans.
// ----------------------------------------------------------------------------------------

const spark_mla_qproj_desc kBf16 = make_desc(SPARK_DTYPE_BF16);
const spark_mla_qproj_desc kE4m3 = make_desc(SPARK_DTYPE_E4M3);

spark_mla_qproj_plan_options make_options(int lazy, int pdl = 0) {
  return spark_mla_qproj_plan_options{sizeof(spark_mla_qproj_plan_options), kMaxM, lazy, pdl};
}

spark_status create_plan(Context& ctx, const spark_mla_qproj_desc& desc, int lazy, Plan& plan, int pdl = 0) {
  const spark_mla_qproj_plan_options o = make_options(lazy, pdl);
  return spark_mla_qproj_plan_create(ctx.h, &desc, &o, &plan.h);
}

spark_status run(const Plan& plan, const spark_mla_qproj_desc& d, int m, spark_stream stream = nullptr) {
  const spark_mla_qproj_args a = make_args(d, m);
  return spark_mla_qproj_run(plan.h, &a, stream);
}

// Compiles (once per process) the kernels of both descriptors into the cache, so that a
// case's counters are about loading them, not building them.
void prewarm() {
  static const bool done = [] {
    fake_cuda_reset();  // whatever the case before left injected
    Context ctx;
    Plan a, b;
    REQUIRE_OK(create_context(ctx));
    REQUIRE_OK(create_plan(ctx, kBf16, 0, a));
    REQUIRE_OK(create_plan(ctx, kE4m3, 0, b));
    return true;
  }();
  (void)done;
}

// ----------------------------------------------------------------------------------------
// cuInit runs once per process (spark keeps the loaded driver in a static), so its failure
// is checked in a fresh copy of this binary that runs only that case.
// ----------------------------------------------------------------------------------------

constexpr const char* kChildEnv = "SPARK_TEST_FAKE_CUDA_CUINIT_CHILD";  // the marker file to write

void cuinit_child(const char* marker) {
  Books books;
  REQUIRE(counters().init_calls == 0);  // the driver is not loaded yet in this process
  fake_cuda_fail("cuInit", CUDA_ERROR_NO_DEVICE, 0);
  for (int attempt = 0; attempt < 2; ++attempt) {
    Context ctx;
    check_error(create_context(ctx), SPARK_ERROR_NO_DEVICE, {"cuInit", "CUDA_ERROR_NO_DEVICE"});
    CHECK(ctx.h == nullptr);
  }
  CHECK(counters().init_calls == 1);  // loaded once; the failure is remembered
  CHECK(counters().primary_retains == 0);
  books.check_balanced();
  std::ofstream(marker) << "ran\n";
}

}  // namespace

TEST_CASE("cuInit failing") {
  if (const char* marker = std::getenv(kChildEnv)) {
    cuinit_child(marker);
    return;
  }
  use_temp_cache();
  const fs::path marker = fs::temp_directory_path() / ("spark-fake-cuda-cuinit-" + std::to_string(::getpid()));
  fs::remove(marker);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  env_strings.push_back(std::string(kChildEnv) + "=" + marker.string());
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", name = "test_driver_failures", filter = "--test-case=cuInit failing",
              quiet = "--minimal=true";
  char* argv[] = {name.data(), filter.data(), quiet.data(), nullptr};
  pid_t pid = 0;
  REQUIRE(::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, envp.data()) == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_MESSAGE(fs::exists(marker), "the child did not run the case");
  fs::remove(marker);
}

TEST_CASE("spark loads the fake driver: the counters move when it creates a context") {
  Books books;
  // The fake is the libcuda.so.1 of this process, so spark's dlopen gets this very object.
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib != nullptr);
  CHECK(::dlsym(lib, "fake_cuda_reset") == reinterpret_cast<void*>(&fake_cuda_reset));
  ::dlclose(lib);

  Context ctx;
  REQUIRE_OK(create_context(ctx));
  CHECK(counters().primary_retains == 1);
  CHECK(counters().primary_refcount == books.start.primary_refcount + 1);
  int32_t cc = 0;
  REQUIRE_OK(spark_context_compute_capability(ctx.h, &cc));
  CHECK(cc == 10 * FAKE_CUDA_CC_MAJOR + FAKE_CUDA_CC_MINOR);
  ctx.destroy();
  CHECK(counters().primary_releases == 1);
  books.check_balanced();
}

TEST_CASE("context: no device, an ordinal out of range, device queries failing") {
  Books books;
  SUBCASE("no device") {
    fake_cuda_set_device_count(0);
    Context ctx;
    check_error(create_context(ctx), SPARK_ERROR_NO_DEVICE, {"device", "0 CUDA device(s)"});
    CHECK(ctx.h == nullptr);
  }
  SUBCASE("ordinal out of range") {
    Context ctx;
    check_error(create_context(ctx, 1), SPARK_ERROR_NO_DEVICE, {"device", "1 does not exist", "1 CUDA device(s)"});
  }
  SUBCASE("cuDeviceGetCount failing") {
    fake_cuda_fail("cuDeviceGetCount", CUDA_ERROR_UNKNOWN, 0);
    Context ctx;
    check_error(create_context(ctx), SPARK_ERROR_CUDA, {"cuDeviceGetCount", "CUDA_ERROR_UNKNOWN"});
  }
  SUBCASE("cuDeviceGet failing") {
    fake_cuda_fail("cuDeviceGet", CUDA_ERROR_INVALID_DEVICE, 0);
    Context ctx;
    check_error(create_context(ctx), SPARK_ERROR_CUDA, {"cuDeviceGet", "CUDA_ERROR_INVALID_DEVICE"});
  }
  SUBCASE("cuDeviceGetAttribute failing") {
    fake_cuda_fail("cuDeviceGetAttribute", CUDA_ERROR_INVALID_VALUE, 2);  // the SM count
    Context ctx;
    check_error(create_context(ctx), SPARK_ERROR_CUDA, {"cuDeviceGetAttribute", "CUDA_ERROR_INVALID_VALUE"});
  }
  CHECK(counters().primary_retains == 0);
  books.check_balanced();
}

TEST_CASE("context: cuDevicePrimaryCtxRetain failing") {
  Books books;
  SUBCASE("CUDA error") {
    fake_cuda_fail("cuDevicePrimaryCtxRetain", CUDA_ERROR_INVALID_DEVICE, 0);
    Context ctx;
    check_error(create_context(ctx), SPARK_ERROR_CUDA, {"cuDevicePrimaryCtxRetain", "CUDA_ERROR_INVALID_DEVICE"});
  }
  SUBCASE("out of memory") {
    fake_cuda_fail("cuDevicePrimaryCtxRetain", CUDA_ERROR_OUT_OF_MEMORY, 0);
    Context ctx;
    check_error(create_context(ctx), SPARK_ERROR_OUT_OF_MEMORY,
                {"cuDevicePrimaryCtxRetain", "CUDA_ERROR_OUT_OF_MEMORY"});
  }
  CHECK(counters().primary_releases == 0);
  books.check_balanced();
}

TEST_CASE("context: the primary context cannot be made current, after it was retained") {
  Books books;
  fake_cuda_fail("cuCtxPushCurrent", CUDA_ERROR_INVALID_CONTEXT, 0);
  Context ctx;
  check_error(create_context(ctx), SPARK_ERROR_CUDA, {"cuCtxPushCurrent", "CUDA_ERROR_INVALID_CONTEXT"});
  CHECK(ctx.h == nullptr);
  // The constructor failed half way: the retain it made is released.
  CHECK(counters().primary_retains == 1);
  CHECK(counters().primary_releases == 1);
  books.check_balanced();
}

TEST_CASE("plan creation: cuCtxPushCurrent failing leaves the context as it was") {
  prewarm();
  Books books;
  Context ctx;
  REQUIRE_OK(create_context(ctx));
  fake_cuda_fail("cuCtxPushCurrent", CUDA_ERROR_INVALID_CONTEXT, 0);
  {
    Plan plan;
    check_error(create_plan(ctx, kBf16, 0, plan), SPARK_ERROR_CUDA, {"cuCtxPushCurrent", "CUDA_ERROR_INVALID_CONTEXT"});
    CHECK(plan.h == nullptr);
  }
  CHECK(counters().modules_loaded == 0);
  fake_cuda_clear_failure("cuCtxPushCurrent");
  SUBCASE("destroyed right away") {}
  SUBCASE("the next plan loads the kernel") {
    Plan plan;
    REQUIRE_OK(create_plan(ctx, kBf16, 0, plan));
    CHECK(counters().modules_loaded == 1);
    REQUIRE_OK(run(plan, kBf16, 3));
    CHECK(counters().launches == 1);
  }
  ctx.destroy();
  books.check_balanced();
}

TEST_CASE("plan creation: cuModuleLoadData failing") {
  prewarm();
  const std::string key = key_for(kBf16).name();
  struct Failure {
    CUresult rc;
    spark_status status;
    const char* name;
  };
  for (const Failure f : {Failure{CUDA_ERROR_OUT_OF_MEMORY, SPARK_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
                          Failure{CUDA_ERROR_INVALID_IMAGE, SPARK_ERROR_CUDA, "CUDA_ERROR_INVALID_IMAGE"}}) {
    for (const bool retry : {false, true}) {
      const std::string rc_name = f.name;
      CAPTURE(rc_name);
      CAPTURE(retry);
      Books books;
      Context ctx;
      REQUIRE_OK(create_context(ctx));
      fake_cuda_fail("cuModuleLoadData", f.rc, 0);
      {
        Plan plan;
        check_error(create_plan(ctx, kBf16, 0, plan), f.status, {"cuModuleLoadData", f.name, key});
        CHECK(plan.h == nullptr);
      }
      CHECK(counters().modules_loaded == 0);
      CHECK(counters().pushes == counters().pops);
      if (retry) {
        // The failure left nothing behind: the same kernel loads now.
        fake_cuda_clear_failure("cuModuleLoadData");
        Plan plan;
        REQUIRE_OK(create_plan(ctx, kBf16, 0, plan));
        REQUIRE_OK(run(plan, kBf16, 16));
        CHECK(counters().modules_loaded == 1);
      }
      // Destroying the context after a failed load (the crash of the bug this file started with).
      ctx.destroy();
      books.check_balanced();
    }
  }
}

TEST_CASE("plan creation: a step after cuModuleLoadData failing unloads the module") {
  prewarm();
  Books books;
  Context ctx;
  REQUIRE_OK(create_context(ctx));
  const std::string key = key_for(kBf16).name();
  Plan plan;
  SUBCASE("cuModuleGetFunction") {
    fake_cuda_fail("cuModuleGetFunction", CUDA_ERROR_NOT_FOUND, 0);
    check_error(create_plan(ctx, kBf16, 0, plan), SPARK_ERROR_CUDA,
                {"cuModuleGetFunction", "CUDA_ERROR_NOT_FOUND", key});
  }
  SUBCASE("cuFuncSetAttribute") {
    fake_cuda_fail("cuFuncSetAttribute", CUDA_ERROR_INVALID_VALUE, 0);
    check_error(create_plan(ctx, kBf16, 0, plan), SPARK_ERROR_CUDA,
                {"cuFuncSetAttribute", "CUDA_ERROR_INVALID_VALUE", key});
  }
  SUBCASE("cuFuncSetAttribute out of memory") {
    fake_cuda_fail("cuFuncSetAttribute", CUDA_ERROR_OUT_OF_MEMORY, 0);
    check_error(create_plan(ctx, kBf16, 0, plan), SPARK_ERROR_OUT_OF_MEMORY,
                {"cuFuncSetAttribute", "CUDA_ERROR_OUT_OF_MEMORY", key});
  }
  SUBCASE("cuOccupancyMaxActiveBlocksPerMultiprocessor") {
    fake_cuda_fail("cuOccupancyMaxActiveBlocksPerMultiprocessor", CUDA_ERROR_UNKNOWN, 0);
    check_error(create_plan(ctx, kBf16, 0, plan), SPARK_ERROR_CUDA,
                {"cuOccupancyMaxActiveBlocksPerMultiprocessor", "CUDA_ERROR_UNKNOWN", key});
  }
  SUBCASE("no CTA fits an SM") {
    fake_cuda_set_occupancy(0);
    check_error(create_plan(ctx, kBf16, 0, plan), SPARK_ERROR_CUDA,
                {"cuOccupancyMaxActiveBlocksPerMultiprocessor", "0", key});
  }
  CHECK(plan.h == nullptr);
  // Unloaded on the failure, not only when the context goes.
  CHECK(counters().modules_loaded == 1);
  CHECK(counters().modules_unloaded == 1);
  CHECK(counters().pushes == counters().pops);
  ctx.destroy();
  books.check_balanced();
}

TEST_CASE("run: cuCtxPushCurrent, cuLaunchKernelEx failing") {
  prewarm();
  Books books;
  Context ctx;
  REQUIRE_OK(create_context(ctx));
  Plan plan;
  REQUIRE_OK(create_plan(ctx, kBf16, 0, plan));
  SUBCASE("cuCtxPushCurrent") {
    fake_cuda_fail("cuCtxPushCurrent", CUDA_ERROR_INVALID_CONTEXT, 0);
    check_error(run(plan, kBf16, 1), SPARK_ERROR_CUDA, {"cuCtxPushCurrent", "CUDA_ERROR_INVALID_CONTEXT"});
    CHECK(fake_cuda_calls("cuLaunchKernelEx") == 0);
  }
  SUBCASE("cuLaunchKernelEx") {
    fake_cuda_fail("cuLaunchKernelEx", CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, 0);
    check_error(run(plan, kBf16, 1), SPARK_ERROR_CUDA, {"cuLaunchKernelEx", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"});
  }
  SUBCASE("cuLaunchKernelEx out of memory") {
    fake_cuda_fail("cuLaunchKernelEx", CUDA_ERROR_OUT_OF_MEMORY, 0);
    check_error(run(plan, kBf16, 1), SPARK_ERROR_OUT_OF_MEMORY, {"cuLaunchKernelEx", "CUDA_ERROR_OUT_OF_MEMORY"});
  }
  CHECK(counters().launches == 0);
  CHECK(fake_cuda_push_depth() == 0);
  // The failure passes: the plan still runs.
  fake_cuda_clear_failure("cuCtxPushCurrent");
  fake_cuda_clear_failure("cuLaunchKernelEx");
  REQUIRE_OK(run(plan, kBf16, 1));
  CHECK(counters().launches == 1);
  plan.destroy();
  ctx.destroy();
  books.check_balanced();
}

TEST_CASE("lazy run: cuStreamIsCapturing failing, a capturing stream, a load failing") {
  prewarm();
  Books books;
  Context ctx;
  REQUIRE_OK(create_context(ctx));
  Plan plan;
  REQUIRE_OK(create_plan(ctx, kE4m3, 1, plan));
  CHECK(counters().modules_loaded == 0);  // lazy: nothing yet
  const std::string key = key_for(kE4m3).name();
  spark_stream stream = reinterpret_cast<spark_stream>(uintptr_t{0x5000});
  SUBCASE("cuStreamIsCapturing failing") {
    fake_cuda_fail("cuStreamIsCapturing", CUDA_ERROR_INVALID_HANDLE, 0);
    check_error(run(plan, kE4m3, 2, stream), SPARK_ERROR_CUDA, {"cuStreamIsCapturing", "CUDA_ERROR_INVALID_HANDLE"});
  }
  SUBCASE("the stream is capturing") {
    fake_cuda_set_capture_status(CU_STREAM_CAPTURE_STATUS_ACTIVE);
    check_error(run(plan, kE4m3, 2, stream), SPARK_ERROR_NOT_LOADED_WHILE_CAPTURING, {key, "capturing"});
  }
  SUBCASE("cuModuleLoadData failing in the run") {
    fake_cuda_fail("cuModuleLoadData", CUDA_ERROR_OUT_OF_MEMORY, 0);
    check_error(run(plan, kE4m3, 2, stream), SPARK_ERROR_OUT_OF_MEMORY,
                {"cuModuleLoadData", "CUDA_ERROR_OUT_OF_MEMORY", key});
  }
  // Nothing was loaded or launched, and the next run outside a capture loads and launches.
  CHECK(counters().modules_loaded == 0);
  CHECK(counters().launches == 0);
  CHECK(counters().pushes == counters().pops);
  fake_cuda_clear_failure("cuStreamIsCapturing");
  fake_cuda_clear_failure("cuModuleLoadData");
  fake_cuda_set_capture_status(CU_STREAM_CAPTURE_STATUS_NONE);
  REQUIRE_OK(run(plan, kE4m3, 2, stream));
  CHECK(counters().modules_loaded == 1);
  CHECK(counters().launches == 1);
  // Loaded now, so a capturing stream is fine (and not even asked about).
  fake_cuda_set_capture_status(CU_STREAM_CAPTURE_STATUS_ACTIVE);
  const long queries = fake_cuda_calls("cuStreamIsCapturing");
  REQUIRE_OK(run(plan, kE4m3, 16, stream));
  CHECK(fake_cuda_calls("cuStreamIsCapturing") == queries);
  CHECK(counters().launches == 2);
  plan.destroy();
  ctx.destroy();
  books.check_balanced();
}

TEST_CASE("context destroy tolerates the driver failing") {
  prewarm();
  Books books;
  Context ctx;
  REQUIRE_OK(create_context(ctx));
  {
    Plan plan;
    REQUIRE_OK(create_plan(ctx, kBf16, 0, plan));
  }
  SUBCASE("cuCtxPushCurrent") {
    // The modules are still unloaded (best effort), the context released, nothing popped.
    fake_cuda_fail("cuCtxPushCurrent", CUDA_ERROR_INVALID_CONTEXT, 0);
    ctx.destroy();
    books.check_balanced();
  }
  SUBCASE("cuModuleUnload") {
    fake_cuda_fail("cuModuleUnload", CUDA_ERROR_UNKNOWN, 0);
    ctx.destroy();
    // The driver kept the module (nothing spark can do); the rest is balanced.
    const fake_cuda_counters c = counters();
    CHECK(c.modules_unloaded == 0);
    CHECK(c.pushes == c.pops);
    CHECK(c.primary_retains == c.primary_releases);
  }
  SUBCASE("cuDevicePrimaryCtxRelease") {
    fake_cuda_fail("cuDevicePrimaryCtxRelease", CUDA_ERROR_UNKNOWN, 0);
    ctx.destroy();
    const fake_cuda_counters c = counters();
    CHECK(c.modules_loaded == c.modules_unloaded);
    CHECK(c.pushes == c.pops);
    CHECK(fake_cuda_calls("cuDevicePrimaryCtxRelease") == 1);
  }
}

TEST_CASE("success: a prewarmed plan launches the regime's kernel, with PDL when asked") {
  prewarm();
  Books books;
  fake_cuda_record_param_bytes(sizeof(spark::MlaQprojParams));
  Context ctx;
  REQUIRE_OK(create_context(ctx));
  for (const spark_mla_qproj_desc& desc : {kBf16, kE4m3}) {
    for (int pdl : {0, 1}) {
      CAPTURE(desc.out_dtype);
      CAPTURE(pdl);
      Plan plan;
      REQUIRE_OK(create_plan(ctx, desc, 0, plan, pdl));
      const spark::KernelKey key = key_for(desc);
      const spark::TileConfig tile = spark::tile_config(key);
      for (int m : {1, 7, 16}) {
        CAPTURE(m);
        const long launches = counters().launches;
        spark_stream stream = reinterpret_cast<spark_stream>(uintptr_t{0x7000});
        REQUIRE_OK(run(plan, desc, m, stream));
        CHECK(counters().launches == launches + 1);
        fake_cuda_launch l;
        REQUIRE(fake_cuda_last_launch(&l) == 1);
        CHECK(l.stream == stream);
        CHECK(l.block[0] == static_cast<unsigned>(tile.threads()));
        CHECK(l.block[1] == 1);
        CHECK(l.block[2] == 1);
        CHECK(l.block[0] % 32 == 0);
        CHECK(l.shared_mem_bytes == static_cast<unsigned>(tile.smem_bytes(key.k, key.out, key.weights)));
        CHECK(l.shared_mem_bytes <= 232448u);
        // One CTA per (head, N block, M tile); a weight-stationary tile splits M only as far
        // as the device (1 CTA per SM here) needs.
        const long long blocks = 1ll * (kN / tile.bn) * kHeads, tiles_m = (m + tile.bm - 1) / tile.bm;
        const long long resident = FAKE_CUDA_SM_COUNT;
        long long grid = blocks * tiles_m;
        if (tile.stationary) grid = blocks * spark::stationary_m_chunks(blocks, tiles_m, resident);
        CHECK(static_cast<long long>(l.grid[0]) == grid);
        CHECK(l.grid[1] == 1);
        CHECK(l.grid[2] == 1);
        CHECK(l.pdl == pdl);
        CHECK(l.num_attrs == static_cast<unsigned>(pdl));
        // The kernel's parameters are the call's.
        REQUIRE(l.param_bytes == sizeof(spark::MlaQprojParams));
        spark::MlaQprojParams p;
        std::memcpy(&p, l.params, sizeof p);
        const spark_mla_qproj_args a = make_args(desc, m);
        CHECK(p.m == m);
        CHECK(p.heads == kHeads);
        CHECK(p.q_nope == a.q_nope);
        CHECK(p.q_pe == a.q_pe);
        CHECK(p.w == a.w);
        CHECK(p.out == a.out);
        CHECK(p.q_scale == a.q_scale);
        CHECK(p.out_stride_m == a.out_stride_m);
        CHECK(p.w_stride_k == a.w_stride_k);
      }
    }
  }
  // Plans of one descriptor share the context's kernel: one module per key.
  CHECK(counters().modules_loaded == 2);
  ctx.destroy();
  books.check_balanced();
}

TEST_CASE("8 threads: lazy plans loading and running at once, with failures injected") {
  prewarm();
  Books books;
  Context ctx;
  REQUIRE_OK(create_context(ctx));
  Plan shared;  // run by every thread
  REQUIRE_OK(create_plan(ctx, kBf16, 1, shared));
  // The first load of all fails once (out of memory), and 3 launches after the first 20 fail.
  fake_cuda_fail_times("cuModuleLoadData", CUDA_ERROR_OUT_OF_MEMORY, 0, 1);
  fake_cuda_fail_times("cuLaunchKernelEx", CUDA_ERROR_LAUNCH_FAILED, 20, 3);

  constexpr int kThreads = 8, kRounds = 6;
  struct Outcome {
    int ok = 0, oom = 0, launch_failed = 0, other = 0, depth = 0;
    std::string other_message;
  };
  std::vector<Outcome> outcomes(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Outcome& o = outcomes[t];
      const auto record = [&](spark_status st) {
        const std::string msg = spark_last_error();
        const auto has = [&](const char* word) { return msg.find(word) != std::string::npos; };
        if (st == SPARK_SUCCESS) {
          ++o.ok;
        } else if (st == SPARK_ERROR_OUT_OF_MEMORY && has("cuModuleLoadData")) {
          ++o.oom;
        } else if (st == SPARK_ERROR_CUDA && has("cuLaunchKernelEx") && has("CUDA_ERROR_LAUNCH_FAILED")) {
          ++o.launch_failed;
        } else {
          ++o.other;
          o.other_message = msg;
        }
      };
      // Half the threads on each descriptor, plus the shared plan: the same keys from
      // several plans, and two keys at once.
      const spark_mla_qproj_desc& desc = t % 2 ? kE4m3 : kBf16;
      Plan own, other;
      record(create_plan(ctx, desc, 1, own));
      record(create_plan(ctx, t % 2 ? kBf16 : kE4m3, 1, other));
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int i = 0; i < kRounds; ++i) {
        const int m = 1 + (t + i) % kMaxM;
        record(run(own, desc, m));
        record(run(shared, kBf16, m));
        record(run(other, t % 2 ? kBf16 : kE4m3, m));
      }
      o.depth = fake_cuda_push_depth();
    });
  }
  for (std::thread& th : threads) th.join();

  Outcome total;
  for (int t = 0; t < kThreads; ++t) {
    const Outcome& o = outcomes[t];
    CAPTURE(t);
    CHECK_MESSAGE(o.other == 0, "unexpected failure: ", o.other_message);
    CHECK(o.depth == 0);
    total.ok += o.ok, total.oom += o.oom, total.launch_failed += o.launch_failed;
  }
  CHECK(total.oom == 1);
  CHECK(total.launch_failed == 3);
  const int runs = kThreads * kRounds * 3;
  CHECK(total.ok == 2 * kThreads + runs - 4);
  CHECK(counters().launches == runs - 4);
  // Each key loaded once, whichever thread got there first.
  CHECK(counters().modules_loaded == 2);
  CHECK(counters().live_modules == books.start.live_modules + 2);
  shared.destroy();
  ctx.destroy();
  books.check_balanced();
}

// ----------------------------------------------------------------------------------------
// The value up-projection's plan on the same runtime: H 8, V 256, L 512, BF16 weights, M up to
// 64 (both of its built-in regimes), out [M, H * V] bf16 or e4m3.  Its tiles come from the
// active tiling, so ctest also runs these cases under SPARK_OPROJ_SCHEDULE=stationary and
// two SPARK_OPROJ_TILES tables (one with ring tiles), whose launch shapes the GPU has not
// checked yet.
// ----------------------------------------------------------------------------------------

constexpr int kOprojV = 256, kOprojL = 512, kOprojMaxM = 300;
constexpr uintptr_t kO = 0x50000000, kWuv = 0x60000000, kOprojOut = 0x70000000, kOutScale = 0x80000000;

struct OprojPlan {
  spark_mla_oproj_plan h = nullptr;
  ~OprojPlan() { destroy(); }
  void destroy() {
    spark_mla_oproj_plan_destroy(h);
    h = nullptr;
  }
};

spark_mla_oproj_desc oproj_desc(spark_dtype out) {
  spark_mla_oproj_desc d = SPARK_MLA_OPROJ_DESC_INIT;
  d.heads = kHeads;
  d.latent_dim = kOprojL;
  d.v_head_dim = kOprojV;
  d.out_dtype = out;
  return d;
}

// o [M, H, L] token-major; W_UV the last V rows of each head of kv_b_proj [H * (128 + V), L]
// (MXFP8: its scales [H * (128 + V), L / 32]); out [M, H * V].
spark_mla_oproj_args oproj_args(const spark_mla_oproj_desc& d, int m) {
  spark_mla_oproj_args a = SPARK_MLA_OPROJ_ARGS_INIT;
  a.m = m;
  a.o = reinterpret_cast<const void*>(kO);
  a.o_stride_m = int64_t{d.heads} * kOprojL;
  a.o_stride_h = kOprojL;
  a.w = reinterpret_cast<const void*>(kWuv + 2 * 128 * kOprojL);
  a.w_stride_h = int64_t{128 + kOprojV} * kOprojL;
  a.w_stride_v = kOprojL;
  if (d.weight_format == SPARK_WEIGHTS_MXFP8) {
    a.w_scale = reinterpret_cast<const void*>(kOutScale);
    a.w_scale_stride_h = int64_t{128 + kOprojV} * (kOprojL / 32);
    a.w_scale_stride_v = kOprojL / 32;
  }
  a.out = reinterpret_cast<void*>(kOprojOut);
  a.out_stride_m = int64_t{d.heads} * kOprojV;
  if (d.out_dtype == SPARK_DTYPE_E4M3) a.out_scale = reinterpret_cast<const float*>(kOutScale);
  return a;
}

spark_status create_oproj_plan(Context& ctx, const spark_mla_oproj_desc& desc, int lazy, OprojPlan& plan,
                               int pdl = 0) {
  const spark_mla_qproj_plan_options o{sizeof(spark_mla_qproj_plan_options), kOprojMaxM, lazy, pdl};
  return spark_mla_oproj_plan_create(ctx.h, &desc, &o, &plan.h);
}

spark_status run_oproj(const OprojPlan& plan, const spark_mla_oproj_desc& d, int m, spark_stream stream = nullptr) {
  const spark_mla_oproj_args a = oproj_args(d, m);
  return spark_mla_oproj_run(plan.h, &a, stream);
}

spark::oproj::Key oproj_key(const spark_mla_oproj_desc& d, int m) {
  for (const spark::MRegime& r : spark::oproj::regimes())
    if (r.contains(m))
      return spark::oproj::Key::of(d.heads, d.v_head_dim, r, static_cast<spark::WeightFormat>(d.weight_format),
                                   d.out_dtype == SPARK_DTYPE_BF16 ? spark::OutDtype::kBf16 : spark::OutDtype::kE4m3,
                                   "sm_90a", d.latent_dim);
  FAIL("no regime covers m = " << m);
  return {};
}

// The regimes a plan of max_m kOprojMaxM holds.
long oproj_regime_count() { return static_cast<long>(spark::oproj::regimes_up_to(kOprojMaxM).size()); }

void prewarm_oproj() {
  static const bool done = [] {
    fake_cuda_reset();
    Context ctx;
    OprojPlan a, b;
    REQUIRE_OK(create_context(ctx));
    REQUIRE_OK(create_oproj_plan(ctx, oproj_desc(SPARK_DTYPE_BF16), 0, a));
    REQUIRE_OK(create_oproj_plan(ctx, oproj_desc(SPARK_DTYPE_E4M3), 0, b));
    return true;
  }();
  (void)done;
}

TEST_CASE("oproj: two teams' M chunks: one team's count with bf16 weights where it fills idle SMs, rounds with FP8") {
  // 16 heads at V = 256: 32 (head, 128 columns) blocks, two teams past M = 128 with either
  // weights.  At M = 768 (12 tiles of 64 rows) rounds of a tile a team give 3 chunks (96 CTAs
  // of four tiles); with bf16 weights one team's count, 4 chunks of three tiles, fills 128 of
  // the 132 SMs.  FP8 weights keep the rounds (each CTA dequantises its whole slice).
  Books books;
  fake_cuda_record_param_bytes(sizeof(spark::MlaOprojParams));
  Context ctx;
  REQUIRE_OK(create_context(ctx));
  constexpr int kH = 16, kM = 768;
  for (const spark_weight_format w : {SPARK_WEIGHTS_BF16, SPARK_WEIGHTS_MXFP8}) {
    CAPTURE(w);
    spark_mla_oproj_desc d = oproj_desc(SPARK_DTYPE_BF16);
    d.heads = kH;
    d.weight_format = w;
    const spark::oproj::Tile tile = spark::oproj::tile_for(oproj_key(d, kM));
    // The built-in schedule gives both two teams; a tuning override may not.
    if (!std::getenv("SPARK_OPROJ_TILES") && !std::getenv("SPARK_OPROJ_SCHEDULE"))
      REQUIRE((tile.stationary && tile.groups == 2));
    if (!(tile.stationary && tile.groups == 2)) {
      MESSAGE("M = 768 takes " << tile.describe() << " under this tiling: no teams to check");
      continue;
    }
    const spark_mla_qproj_plan_options o{sizeof(spark_mla_qproj_plan_options), kM, 1, 0};
    OprojPlan plan;
    REQUIRE_OK(spark_mla_oproj_plan_create(ctx.h, &d, &o, &plan.h));
    REQUIRE_OK(run_oproj(plan, d, kM, reinterpret_cast<spark_stream>(uintptr_t{0x7000})));
    fake_cuda_launch l;
    REQUIRE(fake_cuda_last_launch(&l) == 1);
    CHECK(l.block[0] == 256u);  // two teams of 128 threads
    const unsigned chunks = w == SPARK_WEIGHTS_BF16 ? 4 : 3;
    CHECK(l.grid[0] == 32 * chunks);
    REQUIRE(l.param_bytes == sizeof(spark::MlaOprojParams));
    spark::MlaOprojParams p;
    std::memcpy(&p, l.params, sizeof p);
    CHECK(p.m_chunks == static_cast<int>(chunks));
  }
  ctx.destroy();
  books.check_balanced();
}

TEST_CASE("oproj: a load failing, a launch failing, a lazy plan on a capturing stream") {
  prewarm_oproj();
  Books books;
  Context ctx;
  REQUIRE_OK(create_context(ctx));
  const spark_mla_oproj_desc bf16 = oproj_desc(SPARK_DTYPE_BF16), e4m3 = oproj_desc(SPARK_DTYPE_E4M3);
  {
    // Plan creation loads every regime's kernel: the first load fails, nothing stays loaded.
    fake_cuda_fail("cuModuleLoadData", CUDA_ERROR_OUT_OF_MEMORY, 0);
    OprojPlan plan;
    check_error(create_oproj_plan(ctx, bf16, 0, plan), SPARK_ERROR_OUT_OF_MEMORY,
                {"cuModuleLoadData", "CUDA_ERROR_OUT_OF_MEMORY", oproj_key(bf16, 1).name()});
    CHECK(plan.h == nullptr);
    CHECK(counters().modules_loaded == 0);
    fake_cuda_clear_failure("cuModuleLoadData");
  }
  OprojPlan plan;
  REQUIRE_OK(create_oproj_plan(ctx, bf16, 0, plan));
  CHECK(counters().modules_loaded == oproj_regime_count());
  fake_cuda_fail("cuLaunchKernelEx", CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, 0);
  check_error(run_oproj(plan, bf16, 17), SPARK_ERROR_CUDA, {"cuLaunchKernelEx", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"});
  fake_cuda_clear_failure("cuLaunchKernelEx");
  REQUIRE_OK(run_oproj(plan, bf16, 17));
  CHECK(counters().launches == 1);
  // A bad argument is refused before the driver is asked for anything.
  spark_mla_oproj_args bad = oproj_args(bf16, kOprojMaxM + 1);
  check_error(spark_mla_oproj_run(plan.h, &bad, nullptr), SPARK_ERROR_INVALID_ARGUMENT,
              {"m", std::to_string(kOprojMaxM + 1)});
  CHECK(counters().launches == 1);

  OprojPlan lazy;
  REQUIRE_OK(create_oproj_plan(ctx, e4m3, 1, lazy));
  const long loaded = counters().modules_loaded;
  spark_stream stream = reinterpret_cast<spark_stream>(uintptr_t{0x5000});
  fake_cuda_set_capture_status(CU_STREAM_CAPTURE_STATUS_ACTIVE);
  check_error(run_oproj(lazy, e4m3, 2, stream), SPARK_ERROR_NOT_LOADED_WHILE_CAPTURING,
              {oproj_key(e4m3, 2).name(), "capturing"});
  CHECK(counters().modules_loaded == loaded);
  fake_cuda_set_capture_status(CU_STREAM_CAPTURE_STATUS_NONE);
  REQUIRE_OK(run_oproj(lazy, e4m3, 2, stream));
  CHECK(counters().modules_loaded == loaded + 1);
  CHECK(counters().launches == 2);
  lazy.destroy();
  plan.destroy();
  ctx.destroy();
  books.check_balanced();
}

TEST_CASE("oproj: the launch shape and parameters of every regime, with PDL when asked") {
  prewarm_oproj();
  Books books;
  fake_cuda_record_param_bytes(sizeof(spark::MlaOprojParams));
  Context ctx;
  REQUIRE_OK(create_context(ctx));
  for (const spark_dtype out : {SPARK_DTYPE_BF16, SPARK_DTYPE_E4M3}) {
    for (int pdl : {0, 1}) {
      CAPTURE(out);
      CAPTURE(pdl);
      const spark_mla_oproj_desc desc = oproj_desc(out);
      OprojPlan plan;
      REQUIRE_OK(create_oproj_plan(ctx, desc, 0, plan, pdl));
      for (int m : {1, 7, 16, 17, 33, 64, 200, 300}) {
        CAPTURE(m);
        const spark::oproj::Key key = oproj_key(desc, m);
        const spark::oproj::Tile tile = spark::oproj::tile_for(key);
        CAPTURE(tile.describe());
        // Under SPARK_OPROJ_SCHEDULE=stationary (a ctest of its own) M past decode is stationary.
        if (const char* schedule = std::getenv("SPARK_OPROJ_SCHEDULE"))
          CHECK(tile.stationary == (std::string(schedule) == "stationary" && m > 16));
        spark_stream stream = reinterpret_cast<spark_stream>(uintptr_t{0x7000});
        REQUIRE_OK(run_oproj(plan, desc, m, stream));
        fake_cuda_launch l;
        REQUIRE(fake_cuda_last_launch(&l) == 1);
        CHECK(l.stream == stream);
        CHECK(l.block[0] == static_cast<unsigned>(tile.threads()));
        CHECK((l.block[1] == 1 && l.block[2] == 1 && l.grid[1] == 1 && l.grid[2] == 1));
        CHECK(l.shared_mem_bytes == static_cast<unsigned>(tile.smem_bytes(key)));
        CHECK(l.shared_mem_bytes <= 232448u);
        // A CTA per (head, column block, M tile); the stationary schedule one per (head,
        // column block, M chunk), as many chunks as the device (1 CTA per SM here) needs for
        // its teams; a ring half the CTAs the device holds (at most one per unit).
        const long long blocks = 1ll * kHeads * (kOprojV / tile.bn), tiles_m = (m + tile.bm() - 1) / tile.bm();
        const long long chunks =
            tile.stationary ? spark::oproj::stationary_chunks(tile, key.weights, blocks, tiles_m, FAKE_CUDA_SM_COUNT)
                            : 1;
        const long long ring_grid = std::min(blocks, std::max(1LL, FAKE_CUDA_SM_COUNT / 2LL));
        CHECK(static_cast<long long>(l.grid[0]) ==
              (tile.stationary ? blocks * chunks : tile.ring ? ring_grid : blocks * tiles_m));
        CHECK(l.pdl == pdl);
        CHECK(l.num_attrs == static_cast<unsigned>(pdl));
        REQUIRE(l.param_bytes == sizeof(spark::MlaOprojParams));
        spark::MlaOprojParams p;
        std::memcpy(&p, l.params, sizeof p);
        const spark_mla_oproj_args a = oproj_args(desc, m);
        CHECK((p.m == m && p.heads == kHeads && p.m_chunks == chunks));
        CHECK((p.o == a.o && p.o_stride_m == a.o_stride_m && p.o_stride_h == a.o_stride_h));
        CHECK((p.w == a.w && p.w_stride_h == a.w_stride_h && p.w_stride_v == a.w_stride_v));
        CHECK((p.w_scale == nullptr && p.out == a.out && p.out_stride_m == a.out_stride_m));
        CHECK(p.out_scale == a.out_scale);
      }
    }
  }
  // The plans of one descriptor share the context's kernels: one module per key.
  CHECK(counters().modules_loaded == 2 * oproj_regime_count());
  ctx.destroy();
  books.check_balanced();
}

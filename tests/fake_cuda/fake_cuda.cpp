// A fake CUDA driver for the tests: built as a library whose soname is libcuda.so.1, it
// exports every entry point runtime/cuda_driver.cpp binds, with cuda.h's own declarations
// (so the signatures and the _v2 names are the header's), and the control functions of
// fake_cuda_control.h.  It never touches a device: handles are objects of this file, images
// are copied and searched, launches are recorded.
// Built with hidden visibility; the entry points cuda.h declares are the exports.
#pragma GCC visibility push(default)
#include <cuda.h>
#pragma GCC visibility pop

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fake_cuda_control.h"

// cuda.h leaves these incomplete; the fake's handles point at them.
struct CUctx_st {
  int device = 0;
};
struct CUmod_st;
struct CUfunc_st {
  CUmod_st* module = nullptr;
  int max_dynamic_smem = 48 * 1024;  // the driver's default until cuFuncSetAttribute raises it
};
struct CUmod_st {
  int device = 0;
  std::string image;
  CUfunc_st function;
};

namespace {

constexpr int kMaxDevices = 8;
constexpr int kMaxSmemOptin = 232448;  // sm_90: 227 KiB per block
constexpr int kMaxThreads = 1024;

// Every entry point spark binds, by its exported name.
// clang-format off
constexpr std::array<const char*, 18> kEntryPoints = {
    "cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetAttribute", "cuDeviceGetName",
    "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2", "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2",
    "cuModuleLoadData", "cuModuleUnload", "cuModuleGetFunction", "cuFuncSetAttribute", "cuLaunchKernelEx",
    "cuStreamIsCapturing", "cuOccupancyMaxActiveBlocksPerMultiprocessor", "cuGetErrorName"};
// clang-format on

// "cuCtxPushCurrent" and "cuCtxPushCurrent_v2" name the same entry point.
std::string canonical(const char* name) {
  std::string s = name ? name : "";
  if (s.size() > 3 && s.compare(s.size() - 3, 3, "_v2") == 0) s.resize(s.size() - 3);
  return s;
}

struct Rule {
  CUresult result = CUDA_SUCCESS;
  long skip = 0;    // calls still allowed to succeed
  long times = -1;  // failures left, -1 forever
};

struct Counters {
  std::atomic<long> init_calls{0}, retains{0}, releases{0}, pushes{0}, pops{0}, loaded{0}, unloaded{0}, lookups{0},
      launches{0}, misuse{0};
};

struct State {
  std::mutex mu;  // guards everything below that is not atomic
  std::unordered_map<std::string, Rule> rules;
  std::unordered_map<std::string, long> calls;
  std::unordered_set<CUmod_st*> modules;
  std::string last_misuse;
  bool has_launch = false;
  fake_cuda_launch last_launch{};

  std::atomic<bool> initialized{false};
  std::atomic<int> device_count{1};
  std::atomic<int> occupancy{1};
  std::atomic<int> capture_status{CU_STREAM_CAPTURE_STATUS_NONE};
  std::atomic<size_t> param_bytes{0};
  std::array<CUctx_st, kMaxDevices> contexts{};
  std::array<std::atomic<long>, kMaxDevices> refcount{};
  Counters n;

  State() {
    for (int d = 0; d < kMaxDevices; ++d) contexts[d].device = d;
  }
};

State& state() {
  static State* s = new State;  // never destroyed: spark may call in during exit
  return *s;
}

thread_local std::vector<CUctx_st*> t_stack;  // this thread's pushed contexts

void check_known(const std::string& name) {
  for (const char* e : kEntryPoints)
    if (canonical(e) == name) return;
  std::fprintf(stderr, "fake_cuda: unknown entry point '%s'\n", name.c_str());
  std::abort();
}

// Counts the call; the injected result when a rule says this call fails, else CUDA_SUCCESS.
CUresult enter(const char* entry_point) {
  State& s = state();
  const std::string name = canonical(entry_point);
  std::lock_guard<std::mutex> g(s.mu);
  ++s.calls[name];
  const auto it = s.rules.find(name);
  if (it == s.rules.end()) return CUDA_SUCCESS;
  Rule& r = it->second;
  if (r.skip > 0) {
    --r.skip;
    return CUDA_SUCCESS;
  }
  if (r.times == 0) return CUDA_SUCCESS;
  if (r.times > 0) --r.times;
  return r.result;
}

CUresult misuse(CUresult rc, const std::string& what) {
  State& s = state();
  s.n.misuse.fetch_add(1);
  std::lock_guard<std::mutex> g(s.mu);
  s.last_misuse = what;
  return rc;
}

#define FAKE_ENTER(name)                                                                     \
  do {                                                                                       \
    if (const CUresult injected_ = enter(name); injected_ != CUDA_SUCCESS) return injected_; \
  } while (0)

#define FAKE_REQUIRE_INIT()                                             \
  do {                                                                  \
    if (!state().initialized.load()) return CUDA_ERROR_NOT_INITIALIZED; \
  } while (0)

bool valid_device(CUdevice dev) { return dev >= 0 && dev < state().device_count.load(); }

CUctx_st* current() { return t_stack.empty() ? nullptr : t_stack.back(); }

// The size of an ELF image from its header: the end of the section or program header
// table, whichever is last (cubins put them after the sections).  0 if not ELF64.
size_t elf_size(const unsigned char* p) {
  if (std::memcmp(p, "\177ELF", 4) != 0 || p[4] != 2 /* ELFCLASS64 */) return 0;
  uint64_t phoff, shoff;
  uint16_t phentsize, phnum, shentsize, shnum;
  std::memcpy(&phoff, p + 0x20, 8);
  std::memcpy(&shoff, p + 0x28, 8);
  std::memcpy(&phentsize, p + 0x36, 2);
  std::memcpy(&phnum, p + 0x38, 2);
  std::memcpy(&shentsize, p + 0x3a, 2);
  std::memcpy(&shnum, p + 0x3c, 2);
  return static_cast<size_t>(
      std::max<uint64_t>({64, phoff + uint64_t{phentsize} * phnum, shoff + uint64_t{shentsize} * shnum}));
}

// Whether the function of f is loaded (its module not unloaded).
bool live(CUfunction f) {
  if (!f || !f->module) return false;
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  return s.modules.count(f->module) != 0;
}

const char* error_name(CUresult rc) {
  switch (rc) {
#define FAKE_NAME(e) \
  case e: return #e;
    FAKE_NAME(CUDA_SUCCESS)
    FAKE_NAME(CUDA_ERROR_INVALID_VALUE)
    FAKE_NAME(CUDA_ERROR_OUT_OF_MEMORY)
    FAKE_NAME(CUDA_ERROR_NOT_INITIALIZED)
    FAKE_NAME(CUDA_ERROR_DEINITIALIZED)
    FAKE_NAME(CUDA_ERROR_NO_DEVICE)
    FAKE_NAME(CUDA_ERROR_INVALID_DEVICE)
    FAKE_NAME(CUDA_ERROR_INVALID_IMAGE)
    FAKE_NAME(CUDA_ERROR_INVALID_CONTEXT)
    FAKE_NAME(CUDA_ERROR_NO_BINARY_FOR_GPU)
    FAKE_NAME(CUDA_ERROR_INVALID_HANDLE)
    FAKE_NAME(CUDA_ERROR_NOT_FOUND)
    FAKE_NAME(CUDA_ERROR_NOT_SUPPORTED)
    FAKE_NAME(CUDA_ERROR_ILLEGAL_ADDRESS)
    FAKE_NAME(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    FAKE_NAME(CUDA_ERROR_LAUNCH_FAILED)
    FAKE_NAME(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
    FAKE_NAME(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    FAKE_NAME(CUDA_ERROR_UNKNOWN)
#undef FAKE_NAME
    default: return nullptr;
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// The driver entry points (cuda.h's declarations; its macros add the _v2 suffixes).
// ---------------------------------------------------------------------------------------
extern "C" {

CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
  FAKE_ENTER("cuGetErrorName");
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  *pStr = error_name(error);
  return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuInit(unsigned int Flags) {
  state().n.init_calls.fetch_add(1);
  FAKE_ENTER("cuInit");
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  state().initialized.store(true);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int* driverVersion) {
  FAKE_ENTER("cuDriverGetVersion");
  if (!driverVersion) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = CUDA_VERSION;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  FAKE_ENTER("cuDeviceGetCount");
  FAKE_REQUIRE_INIT();
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = state().device_count.load();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  FAKE_ENTER("cuDeviceGet");
  FAKE_REQUIRE_INIT();
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  FAKE_ENTER("cuDeviceGetAttribute");
  FAKE_REQUIRE_INIT();
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = FAKE_CUDA_CC_MAJOR; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = FAKE_CUDA_CC_MINOR; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = FAKE_CUDA_SM_COUNT; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *pi = kMaxSmemOptin; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = kMaxThreads; return CUDA_SUCCESS;
    // Anything else is not emulated: say so rather than invent a value.
    default: return CUDA_ERROR_NOT_SUPPORTED;
  }
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  FAKE_ENTER("cuDeviceGetName");
  FAKE_REQUIRE_INIT();
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(len), "spark fake H200 %d", dev);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  FAKE_ENTER("cuDevicePrimaryCtxRetain");
  FAKE_REQUIRE_INIT();
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  State& s = state();
  s.refcount[dev].fetch_add(1);
  s.n.retains.fetch_add(1);
  *pctx = &s.contexts[dev];
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  FAKE_ENTER("cuDevicePrimaryCtxRelease");
  FAKE_REQUIRE_INIT();
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  State& s = state();
  long count = s.refcount[dev].load();
  do {
    if (count <= 0) return misuse(CUDA_ERROR_INVALID_CONTEXT, "cuDevicePrimaryCtxRelease of a context not retained");
  } while (!s.refcount[dev].compare_exchange_weak(count, count - 1));
  s.n.releases.fetch_add(1);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) {
  FAKE_ENTER("cuCtxPushCurrent");
  FAKE_REQUIRE_INIT();
  State& s = state();
  if (std::none_of(s.contexts.begin(), s.contexts.end(), [&](const CUctx_st& c) { return &c == ctx; }))
    return misuse(CUDA_ERROR_INVALID_CONTEXT, "cuCtxPushCurrent of an unknown context");
  if (s.refcount[ctx->device].load() <= 0)
    return misuse(CUDA_ERROR_INVALID_CONTEXT, "cuCtxPushCurrent of a primary context that is not retained");
  t_stack.push_back(ctx);
  s.n.pushes.fetch_add(1);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext* pctx) {
  FAKE_ENTER("cuCtxPopCurrent");
  FAKE_REQUIRE_INIT();
  if (t_stack.empty()) return misuse(CUDA_ERROR_INVALID_CONTEXT, "cuCtxPopCurrent with no context pushed");
  if (pctx) *pctx = t_stack.back();
  t_stack.pop_back();
  state().n.pops.fetch_add(1);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) {
  FAKE_ENTER("cuModuleLoadData");
  FAKE_REQUIRE_INIT();
  if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = current();
  if (!ctx) return misuse(CUDA_ERROR_INVALID_CONTEXT, "cuModuleLoadData with no current context");
  const auto* bytes = static_cast<const unsigned char*>(image);
  const size_t size = elf_size(bytes);
  if (size == 0) return CUDA_ERROR_INVALID_IMAGE;
  auto* m = new CUmod_st;
  m->device = ctx->device;
  m->image.assign(reinterpret_cast<const char*>(bytes), size);
  m->function.module = m;
  State& s = state();
  {
    std::lock_guard<std::mutex> g(s.mu);
    s.modules.insert(m);
  }
  s.n.loaded.fetch_add(1);
  *module = m;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod) {
  FAKE_ENTER("cuModuleUnload");
  FAKE_REQUIRE_INIT();
  State& s = state();
  {
    std::lock_guard<std::mutex> g(s.mu);
    if (!hmod || s.modules.erase(hmod) == 0) {
      s.n.misuse.fetch_add(1);
      s.last_misuse = "cuModuleUnload of a module not loaded";
      return CUDA_ERROR_INVALID_HANDLE;
    }
  }
  delete hmod;
  s.n.unloaded.fetch_add(1);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  FAKE_ENTER("cuModuleGetFunction");
  FAKE_REQUIRE_INIT();
  if (!hfunc || !name) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  if (!hmod || s.modules.count(hmod) == 0) {
    s.n.misuse.fetch_add(1);
    s.last_misuse = "cuModuleGetFunction on a module not loaded";
    return CUDA_ERROR_INVALID_HANDLE;
  }
  // The symbol name sits in the image's string table; the image holds one kernel.
  const std::string needle = std::string(name) + '\0';
  if (hmod->image.find(needle) == std::string::npos) return CUDA_ERROR_NOT_FOUND;
  s.n.lookups.fetch_add(1);
  *hfunc = &hmod->function;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value) {
  FAKE_ENTER("cuFuncSetAttribute");
  FAKE_REQUIRE_INIT();
  if (!live(hfunc)) return misuse(CUDA_ERROR_INVALID_HANDLE, "cuFuncSetAttribute on a function not loaded");
  if (attrib == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    if (value < 0 || value > kMaxSmemOptin) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> g(state().mu);
    hfunc->max_dynamic_smem = value;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, CUfunction func, int blockSize,
                                                             size_t dynamicSMemSize) {
  FAKE_ENTER("cuOccupancyMaxActiveBlocksPerMultiprocessor");
  FAKE_REQUIRE_INIT();
  if (!numBlocks || blockSize <= 0 || blockSize > kMaxThreads) return CUDA_ERROR_INVALID_VALUE;
  if (!live(func))
    return misuse(CUDA_ERROR_INVALID_HANDLE, "cuOccupancyMaxActiveBlocksPerMultiprocessor on a function not loaded");
  int limit;
  {
    std::lock_guard<std::mutex> g(state().mu);
    limit = func->max_dynamic_smem;
  }
  // Like the driver: a block that asks for more than the function allows fits nowhere.
  *numBlocks = dynamicSMemSize > static_cast<size_t>(limit) ? 0 : state().occupancy.load();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
  FAKE_ENTER("cuStreamIsCapturing");
  FAKE_REQUIRE_INIT();
  if (!captureStatus) return CUDA_ERROR_INVALID_VALUE;
  // The legacy stream (NULL) is the current context's.
  if (!hStream && !current())
    return misuse(CUDA_ERROR_INVALID_CONTEXT, "cuStreamIsCapturing(NULL) with no current context");
  *captureStatus = static_cast<CUstreamCaptureStatus>(state().capture_status.load());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra) {
  FAKE_ENTER("cuLaunchKernelEx");
  FAKE_REQUIRE_INIT();
  if (!config || extra) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st* ctx = current();
  if (!ctx) return misuse(CUDA_ERROR_INVALID_CONTEXT, "cuLaunchKernelEx with no current context");
  if (!live(f)) return misuse(CUDA_ERROR_INVALID_HANDLE, "cuLaunchKernelEx of a function not loaded");
  if (f->module->device != ctx->device)
    return misuse(CUDA_ERROR_INVALID_CONTEXT, "cuLaunchKernelEx of another context's function");
  const CUlaunchConfig& c = *config;
  const unsigned long long threads = 1ull * c.blockDimX * c.blockDimY * c.blockDimZ;
  if (c.gridDimX == 0 || c.gridDimY == 0 || c.gridDimZ == 0 || threads == 0 || threads > kMaxThreads)
    return misuse(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernelEx with an empty or oversized grid or block");
  State& s = state();
  fake_cuda_launch rec{};
  {
    std::lock_guard<std::mutex> g(s.mu);
    if (c.sharedMemBytes > static_cast<unsigned>(f->max_dynamic_smem)) {
      s.n.misuse.fetch_add(1);
      s.last_misuse = "cuLaunchKernelEx with more dynamic shared memory than cuFuncSetAttribute allowed";
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (c.numAttrs > 0 && !c.attrs) return CUDA_ERROR_INVALID_VALUE;
  rec.grid[0] = c.gridDimX, rec.grid[1] = c.gridDimY, rec.grid[2] = c.gridDimZ;
  rec.block[0] = c.blockDimX, rec.block[1] = c.blockDimY, rec.block[2] = c.blockDimZ;
  rec.shared_mem_bytes = c.sharedMemBytes;
  rec.stream = c.hStream;
  rec.function = f;
  rec.num_attrs = c.numAttrs;
  for (unsigned i = 0; i < c.numAttrs; ++i)
    if (c.attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION &&
        c.attrs[i].value.programmaticStreamSerializationAllowed == 1)
      rec.pdl = 1;
  rec.param_bytes = std::min<size_t>(s.param_bytes.load(), FAKE_CUDA_MAX_PARAM_BYTES);
  if (rec.param_bytes > 0) {
    if (!kernelParams || !kernelParams[0]) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(rec.params, kernelParams[0], rec.param_bytes);
  }
  std::lock_guard<std::mutex> g(s.mu);
  s.last_launch = rec;
  s.has_launch = true;
  s.n.launches.fetch_add(1);
  return CUDA_SUCCESS;
}

// Not spark's: NVRTC dlopens libcuda.so.1 when it compiles and asks for this table (it
// crashes when the symbol is missing).  No table here: NVRTC goes on without the driver, as
// on a machine without one.
CUresult CUDAAPI cuGetExportTable(const void** ppExportTable, const CUuuid* pExportTableId) {
  (void)pExportTableId;
  if (ppExportTable) *ppExportTable = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}

// ---------------------------------------------------------------------------------------
// Control.
// ---------------------------------------------------------------------------------------

void fake_cuda_fail_times(const char* entry_point, int cuda_result, int after_n_calls, int times) {
  const std::string name = canonical(entry_point);
  check_known(name);
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  s.rules[name] = Rule{static_cast<CUresult>(cuda_result), after_n_calls, times};
}

void fake_cuda_fail(const char* entry_point, int cuda_result, int after_n_calls) {
  fake_cuda_fail_times(entry_point, cuda_result, after_n_calls, -1);
}

void fake_cuda_clear_failure(const char* entry_point) {
  const std::string name = canonical(entry_point);
  check_known(name);
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  s.rules.erase(name);
}

void fake_cuda_reset(void) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  s.rules.clear();
  s.calls.clear();
  s.last_misuse.clear();
  s.has_launch = false;
  s.device_count = 1;
  s.occupancy = 1;
  s.capture_status = CU_STREAM_CAPTURE_STATUS_NONE;
  s.param_bytes = 0;
  for (std::atomic<long>* c : {&s.n.init_calls, &s.n.retains, &s.n.releases, &s.n.pushes, &s.n.pops, &s.n.loaded,
                               &s.n.unloaded, &s.n.lookups, &s.n.launches, &s.n.misuse})
    c->store(0);
}

void fake_cuda_set_device_count(int count) { state().device_count = std::clamp(count, 0, kMaxDevices); }
void fake_cuda_set_occupancy(int blocks_per_sm) { state().occupancy = blocks_per_sm; }
void fake_cuda_set_capture_status(int status) { state().capture_status = status; }
void fake_cuda_record_param_bytes(size_t bytes) { state().param_bytes = bytes; }

long fake_cuda_calls(const char* entry_point) {
  const std::string name = canonical(entry_point);
  check_known(name);
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  const auto it = s.calls.find(name);
  return it == s.calls.end() ? 0 : it->second;
}

void fake_cuda_get_counters(fake_cuda_counters* out) {
  State& s = state();
  fake_cuda_counters c{};
  c.init_calls = s.n.init_calls;
  c.primary_retains = s.n.retains;
  c.primary_releases = s.n.releases;
  for (const auto& r : s.refcount) c.primary_refcount += r.load();
  c.pushes = s.n.pushes;
  c.pops = s.n.pops;
  c.modules_loaded = s.n.loaded;
  c.modules_unloaded = s.n.unloaded;
  {
    std::lock_guard<std::mutex> g(s.mu);
    c.live_modules = static_cast<long>(s.modules.size());
  }
  c.function_lookups = s.n.lookups;
  c.launches = s.n.launches;
  c.misuse = s.n.misuse;
  *out = c;
}

int fake_cuda_push_depth(void) { return static_cast<int>(t_stack.size()); }

void fake_cuda_last_misuse(char* buf, size_t size) {
  if (!buf || size == 0) return;
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  std::snprintf(buf, size, "%s", s.last_misuse.c_str());
}

int fake_cuda_last_launch(fake_cuda_launch* out) {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  if (!s.has_launch) return 0;
  *out = s.last_launch;
  return 1;
}

}  // extern "C"

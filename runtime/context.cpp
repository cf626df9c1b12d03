#include "runtime/context.h"

#include <chrono>
#include <utility>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/key_name.h"
#include "jit/arch.h"

namespace spark {

namespace {

// A module just loaded, unloaded on destruction unless the table took it: every failure
// after cuModuleLoadData unloads it.  Destroyed while the caller's ScopedCurrent is still
// in place (declared after it), since cuModuleUnload acts on the current context.
class ModuleGuard {
 public:
  ModuleGuard() = default;
  ~ModuleGuard() {
    if (module_) cuda_driver().ModuleUnload(module_);  // a failure path: its error is the one reported
  }
  ModuleGuard(const ModuleGuard&) = delete;
  ModuleGuard& operator=(const ModuleGuard&) = delete;

  CUmodule* out() { return &module_; }
  CUmodule get() const { return module_; }
  CUmodule release() { return std::exchange(module_, nullptr); }

 private:
  CUmodule module_ = nullptr;
};

}  // namespace

ScopedCurrent::ScopedCurrent(CUcontext ctx) { SPARK_CU_CHECK(CtxPushCurrent, ctx); }

ScopedCurrent::~ScopedCurrent() {
  // Only constructed objects get here, so there is always a push to undo.  A destructor
  // cannot report a failed pop; it leaves the driver's stack as the driver decided.
  CUcontext ignored = nullptr;
  if (cuda_driver().CtxPopCurrent(&ignored) != CUDA_SUCCESS) log().warn("cuCtxPopCurrent failed after a push");
}

PrimaryContext::PrimaryContext(CUdevice device) : device_(device) {
  SPARK_CU_CHECK(DevicePrimaryCtxRetain, &ctx_, device);
}

PrimaryContext::~PrimaryContext() {
  const CUresult rc = cuda_driver().DevicePrimaryCtxRelease(device_);
  if (rc != CUDA_SUCCESS) log().warn("cuDevicePrimaryCtxRelease failed: {}", cu_result_name(rc));
}

Context::Context(int device) : device_(device), store_(default_cache_dir()) {
  // The first driver call loads the driver (NO_DEVICE, naming the reason, when it cannot).
  int count = 0;
  SPARK_CU_CHECK(DeviceGetCount, &count);
  SPARK_CHECK(device >= 0 && device < count, SPARK_ERROR_NO_DEVICE,
              "argument 'device': {} does not exist ({} CUDA device(s) present)", device, count);
  SPARK_CU_CHECK(DeviceGet, &cu_device_, device);
  int major = 0, minor = 0;
  SPARK_CU_CHECK(DeviceGetAttribute, &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cu_device_);
  SPARK_CU_CHECK(DeviceGetAttribute, &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cu_device_);
  cc_ = major * 10 + minor;
  SPARK_CU_CHECK(DeviceGetAttribute, &sm_count_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, cu_device_);
  arch_ = arch_for_compute_capability(cc_);
  // From here on a failure releases the retain: primary_ is a member, destroyed when the
  // constructor throws.
  primary_.emplace(cu_device_);
  // A context that cannot be made current fails here, at spark_context_create, rather than
  // at the first plan.
  { ScopedCurrent check(primary_->get()); }
  log().info("context on device {} (sm_{}), kernels for {}, cache {}", device, cc_, arch_,
             store_.cache().root().string());
}

Context::~Context() {
  // Never throws, whatever the driver says.  The table holds only complete kernels; their
  // modules go before the primary context (primary_ is released after this body).
  try {
    std::unique_lock<std::shared_mutex> g(mu_);
    if (kernels_.empty() || !primary_) return;
    const CudaDriver& cu = cuda_driver();  // loaded: the constructor got this far
    // cuModuleUnload acts on the current context.  If the push fails, try the unloads
    // anyway rather than leak the modules for sure: the primary context is shared with the
    // host (PyTorch retains it too), so releasing it does not free them.  Pop only a push.
    const CUresult pushed = cu.CtxPushCurrent(primary_->get());
    if (pushed != CUDA_SUCCESS) log().warn("cuCtxPushCurrent failed: {}", cu_result_name(pushed));
    for (const auto& [name, k] : kernels_) {
      if (!k || !k->module) continue;
      const CUresult rc = cu.ModuleUnload(k->module);
      if (rc != CUDA_SUCCESS) log().warn("cuModuleUnload failed for {}: {}", name, cu_result_name(rc));
    }
    if (pushed == CUDA_SUCCESS) {
      CUcontext ignored = nullptr;
      cu.CtxPopCurrent(&ignored);
    }
  } catch (...) {
  }
}

const LoadedKernel* Context::find(const std::string& key) const {
  std::shared_lock<std::shared_mutex> g(mu_);
  const auto it = kernels_.find(key);
  return it == kernels_.end() ? nullptr : it->second.get();
}

const LoadedKernel& Context::load(const KernelSpec& spec, std::string_view during) {
  const std::string& name = spec.key;
  if (const LoadedKernel* k = find(name)) return *k;
  // Build (or read from disk) without holding the table lock: a compile can take a while.
  BuiltKernel built;
  try {
    built = store_.get(spec);
  } catch (const Error& e) {
    // The host gets the status; whoever runs the deployment needs to hear of it too.
    if (e.status() == SPARK_ERROR_JIT_DISABLED) log().error("{} (during {})", e.what(), during);
    throw;
  }
  if (built.source != BuildSource::kCacheHit)
    log().warn("kernel {} was not in the cache {}: compiling it during {} took {:.0f} ms; spark-prewarm fills the "
               "cache ahead of serving",
               name, store_.cache().root().string(), during, built.ms);

  std::unique_lock<std::shared_mutex> g(mu_);
  if (const auto it = kernels_.find(name); it != kernels_.end()) return *it->second;  // another thread won
  auto k = std::make_unique<LoadedKernel>();
  k->key = name;
  k->threads = spec.threads;
  k->smem_bytes = spec.smem_bytes;
  k->source = built.source;

  // Each step completes or throws; a throw pops the context and unloads the module (in
  // that order of declaration, reversed), and the table never saw the kernel.
  ScopedCurrent current(cu_context());
  ModuleGuard module;
  const auto load_start = std::chrono::steady_clock::now();
  SPARK_CU_CHECK_FOR(name, ModuleLoadData, module.out(), built.cubin.data());
  store_.record_module_load(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count());
  SPARK_CU_CHECK_FOR(name, ModuleGetFunction, &k->function, module.get(),
                     kernel_symbol(key_op(name)).c_str());
  SPARK_CU_CHECK_FOR(name, FuncSetAttribute, k->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                     k->smem_bytes);
  int per_sm = 0;
  SPARK_CU_CHECK_FOR(name, OccupancyMaxActiveBlocksPerMultiprocessor, &per_sm, k->function, k->threads,
                     static_cast<size_t>(k->smem_bytes));
  SPARK_CHECK(per_sm >= 1, SPARK_ERROR_CUDA,
              "cuOccupancyMaxActiveBlocksPerMultiprocessor gives {} CTAs of {} per SM ({} threads, {} bytes of "
              "shared memory): it cannot run on this device",
              per_sm, name, k->threads, k->smem_bytes);
  k->resident_ctas = per_sm * sm_count_;
  k->module = module.get();
  const LoadedKernel& loaded = *kernels_.emplace(name, std::move(k)).first->second;
  module.release();  // the table owns it now
  log().debug("loaded {} ({})", name, to_string(built.source));
  return loaded;
}

}  // namespace spark

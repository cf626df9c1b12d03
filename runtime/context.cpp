#include "runtime/context.h"

#include <chrono>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "generator/tile_config.h"

namespace spark {

ScopedCurrent::ScopedCurrent(CUcontext ctx) {
  SPARK_CU_CHECK(cuda_driver().CtxPushCurrent(ctx));
  pushed_ = true;
}

ScopedCurrent::~ScopedCurrent() {
  if (pushed_) {
    CUcontext ignored = nullptr;
    cuda_driver().CtxPopCurrent(&ignored);
  }
}

Context::Context(int device) : device_(device), store_(default_cache_dir()) {
  const CudaDriver& cu = cuda_driver();
  int count = 0;
  SPARK_CU_CHECK(cu.DeviceGetCount(&count));
  SPARK_CHECK(device >= 0 && device < count, SPARK_ERROR_NO_DEVICE,
              "argument 'device': {} does not exist ({} CUDA device(s) present)", device, count);
  SPARK_CU_CHECK(cu.DeviceGet(&cu_device_, device));
  int major = 0, minor = 0;
  SPARK_CU_CHECK(cu.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cu_device_));
  SPARK_CU_CHECK(cu.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cu_device_));
  cc_ = major * 10 + minor;
  SPARK_CU_CHECK(cu.DeviceGetAttribute(&sm_count_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, cu_device_));
  arch_ = arch_for_compute_capability(cc_);
  SPARK_CU_CHECK(cu.DevicePrimaryCtxRetain(&ctx_, cu_device_));
  log().info("context on device {} (sm_{}), kernels for {}, cache {}", device, cc_, arch_,
             store_.cache().root().string());
}

Context::~Context() {
  const CudaDriver& cu = cuda_driver();
  {
    std::unique_lock<std::shared_mutex> g(mu_);
    if (!kernels_.empty()) {
      cu.CtxPushCurrent(ctx_);
      for (auto& [name, k] : kernels_) cu.ModuleUnload(k->module);
      CUcontext ignored = nullptr;
      cu.CtxPopCurrent(&ignored);
    }
  }
  cu.DevicePrimaryCtxRelease(cu_device_);
}

const LoadedKernel* Context::find(const KernelKey& key) const {
  std::shared_lock<std::shared_mutex> g(mu_);
  const auto it = kernels_.find(key.name());
  return it == kernels_.end() ? nullptr : it->second.get();
}

const LoadedKernel& Context::load(const KernelKey& key) {
  if (const LoadedKernel* k = find(key)) return *k;
  // Build (or read from disk) without holding the table lock: a compile can take a while.
  BuiltKernel built = store_.get(key);

  std::unique_lock<std::shared_mutex> g(mu_);
  auto& slot = kernels_[key.name()];
  if (slot) return *slot;
  const CudaDriver& cu = cuda_driver();
  ScopedCurrent current(ctx_);
  auto k = std::make_unique<LoadedKernel>();
  k->key = key;
  k->tile = built.rendered.tile;
  k->threads = built.rendered.threads;
  k->smem_bytes = built.rendered.smem_bytes;
  k->source = built.source;
  const auto load_start = std::chrono::steady_clock::now();
  SPARK_CU_CHECK(cu.ModuleLoadData(&k->module, built.cubin.data()));
  store_.record_module_load(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count());
  auto fail = [&](const std::string& what, CUresult rc) {
    cu.ModuleUnload(k->module);
    kernels_.erase(key.name());
    SPARK_FAIL(SPARK_ERROR_CUDA, "{} {}: {}", what, key.name(), cu_result_name(rc));
  };
  CUresult rc = cu.ModuleGetFunction(&k->function, k->module, kKernelEntryName);
  if (rc != CUDA_SUCCESS) fail(fmt::format("no kernel {} in the cubin of", kKernelEntryName), rc);
  rc = cu.FuncSetAttribute(k->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k->smem_bytes);
  if (rc != CUDA_SUCCESS) fail(fmt::format("cannot give {} bytes of shared memory to", k->smem_bytes), rc);
  int per_sm = 0;
  rc = cu.OccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k->function, k->threads,
                                                    static_cast<size_t>(k->smem_bytes));
  if (rc != CUDA_SUCCESS || per_sm < 1) fail("cannot make a CTA resident for", rc);
  k->resident_ctas = per_sm * sm_count_;
  log().debug("loaded {} ({})", key.name(), to_string(built.source));
  slot = std::move(k);
  return *slot;
}

}  // namespace spark

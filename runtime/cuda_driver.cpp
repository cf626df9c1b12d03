#include "runtime/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

#include "core/error.h"

namespace spark {

namespace {

struct Loaded {
  CudaDriver api{};
  std::string error;  // why the driver is unusable, empty when fine
};

template <class Fn>
bool bind(void* lib, const char* name, Fn& fn, std::string& error) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, name));
  if (!fn && error.empty()) error = fmt::format("libcuda.so.1 has no symbol {}", name);
  return fn != nullptr;
}

Loaded load() {
  Loaded l;
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = ::dlerror();
    l.error = fmt::format("cannot load the CUDA driver (libcuda.so.1): {}", why ? why : "not found");
    return l;
  }
  CudaDriver& d = l.api;
  std::string& e = l.error;
  bind(lib, "cuInit", d.Init, e);
  bind(lib, "cuDriverGetVersion", d.DriverGetVersion, e);
  bind(lib, "cuDeviceGetCount", d.DeviceGetCount, e);
  bind(lib, "cuDeviceGet", d.DeviceGet, e);
  bind(lib, "cuDeviceGetAttribute", d.DeviceGetAttribute, e);
  bind(lib, "cuDeviceGetName", d.DeviceGetName, e);
  bind(lib, "cuDevicePrimaryCtxRetain", d.DevicePrimaryCtxRetain, e);
  bind(lib, "cuDevicePrimaryCtxRelease_v2", d.DevicePrimaryCtxRelease, e);
  bind(lib, "cuCtxPushCurrent_v2", d.CtxPushCurrent, e);
  bind(lib, "cuCtxPopCurrent_v2", d.CtxPopCurrent, e);
  bind(lib, "cuModuleLoadData", d.ModuleLoadData, e);
  bind(lib, "cuModuleUnload", d.ModuleUnload, e);
  bind(lib, "cuModuleGetFunction", d.ModuleGetFunction, e);
  bind(lib, "cuFuncSetAttribute", d.FuncSetAttribute, e);
  bind(lib, "cuLaunchKernelEx", d.LaunchKernelEx, e);
  bind(lib, "cuStreamIsCapturing", d.StreamIsCapturing, e);
  bind(lib, "cuOccupancyMaxActiveBlocksPerMultiprocessor", d.OccupancyMaxActiveBlocksPerMultiprocessor, e);
  bind(lib, "cuGetErrorName", d.GetErrorName, e);
  if (!e.empty()) return l;
  const CUresult rc = d.Init(0);
  if (rc != CUDA_SUCCESS) {
    const char* name = nullptr;
    d.GetErrorName(rc, &name);
    e = fmt::format("cuInit failed: {}", name ? name : "unknown error");
  }
  return l;
}

}  // namespace

const CudaDriver& cuda_driver() {
  static const Loaded loaded = load();
  SPARK_CHECK(loaded.error.empty(), SPARK_ERROR_NO_DEVICE, "{}", loaded.error);
  return loaded.api;
}

std::string cu_result_name(CUresult rc) {
  const char* name = nullptr;
  try {
    cuda_driver().GetErrorName(rc, &name);
  } catch (const Error&) {
  }
  return name ? std::string(name) : fmt::format("CUresult {}", static_cast<int>(rc));
}

}  // namespace spark

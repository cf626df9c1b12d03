#include "runtime/cuda_driver.h"

#include <mutex>

#include "core/dynlib.h"
#include "core/error.h"

namespace spark {

namespace {

struct Loaded {
  CudaDriver api{};
  bool bound = false;  // the library loaded and every entry point found (cuInit may still have failed)
  std::string path;    // the library file, as the loader resolved it
  std::string error;   // why the driver is unusable, empty when fine
};

Loaded load() {
  Loaded l;
  const std::string file = "libcuda.so.1";
  void* lib = open_library(file, "the CUDA driver", l.error);
  if (!lib) return l;
  CudaDriver& d = l.api;
  std::string& e = l.error;
  const auto bind = [&](const char* name, auto& fn) { bind_symbol(lib, file, name, fn, e); };
  bind("cuInit", d.Init);
  bind("cuDriverGetVersion", d.DriverGetVersion);
  bind("cuDeviceGetCount", d.DeviceGetCount);
  bind("cuDeviceGet", d.DeviceGet);
  bind("cuDeviceGetAttribute", d.DeviceGetAttribute);
  bind("cuDeviceGetName", d.DeviceGetName);
  bind("cuDevicePrimaryCtxRetain", d.DevicePrimaryCtxRetain);
  bind("cuDevicePrimaryCtxRelease_v2", d.DevicePrimaryCtxRelease);
  bind("cuCtxPushCurrent_v2", d.CtxPushCurrent);
  bind("cuCtxPopCurrent_v2", d.CtxPopCurrent);
  bind("cuModuleLoadData", d.ModuleLoadData);
  bind("cuModuleUnload", d.ModuleUnload);
  bind("cuModuleGetFunction", d.ModuleGetFunction);
  bind("cuFuncSetAttribute", d.FuncSetAttribute);
  bind("cuLaunchKernelEx", d.LaunchKernelEx);
  bind("cuStreamIsCapturing", d.StreamIsCapturing);
  bind("cuOccupancyMaxActiveBlocksPerMultiprocessor", d.OccupancyMaxActiveBlocksPerMultiprocessor);
  bind("cuGetErrorName", d.GetErrorName);
  if (!e.empty()) return l;
  l.bound = true;
  Dl_info where{};
  l.path = ::dladdr(reinterpret_cast<void*>(d.Init), &where) && where.dli_fname ? where.dli_fname : file;
  const CUresult rc = d.Init(0);
  if (rc != CUDA_SUCCESS) {
    const char* name = nullptr;
    d.GetErrorName(rc, &name);
    e = fmt::format("cuInit failed: {}", name ? name : "unknown error");
  }
  return l;
}

const Loaded& loaded_driver() {
  static const Loaded loaded = load();
  return loaded;
}

}  // namespace

DriverInfo cuda_driver_info() {
  const Loaded& l = loaded_driver();
  DriverInfo info;
  info.problem = l.error;
  if (!l.bound) return info;
  info.loaded = true;
  info.path = l.path;
  if (l.api.DriverGetVersion(&info.version) != CUDA_SUCCESS) info.version = 0;
  if (!l.error.empty()) return info;
  int count = 0;
  if (l.api.DeviceGetCount(&count) != CUDA_SUCCESS) return info;
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    DriverInfo::Gpu g;
    g.ordinal = i;
    char name[256] = {};
    int major = 0, minor = 0;
    if (l.api.DeviceGet(&dev, i) != CUDA_SUCCESS) continue;
    if (l.api.DeviceGetName(name, sizeof name - 1, dev) == CUDA_SUCCESS) g.name = name;
    if (l.api.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) == CUDA_SUCCESS &&
        l.api.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) == CUDA_SUCCESS)
      g.compute_capability = major * 10 + minor;
    info.gpus.push_back(std::move(g));
  }
  return info;
}

const CudaDriver& cuda_driver() {
  const Loaded& loaded = loaded_driver();
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

spark_status cu_status(CUresult rc) {
  return rc == CUDA_ERROR_OUT_OF_MEMORY ? SPARK_ERROR_OUT_OF_MEMORY : SPARK_ERROR_CUDA;
}

void throw_cu_error(CUresult rc, const char* call, const std::string& subject, const char* file, int line) {
  throw_error(cu_status(rc),
              subject.empty() ? fmt::format("{} failed: {}", call, cu_result_name(rc))
                              : fmt::format("{} failed for {}: {}", call, subject, cu_result_name(rc)),
              file, line);
}

}  // namespace spark

#include "runtime/cuda_driver.h"

#include <mutex>

#include "core/dynlib.h"
#include "core/error.h"

namespace spark {

namespace {

struct Loaded {
  CudaDriver api{};
  std::string error;  // why the driver is unusable, empty when fine
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

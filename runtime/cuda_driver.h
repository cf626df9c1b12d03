// The CUDA Driver API, loaded with dlopen("libcuda.so.1") on first use: nothing links
// libcuda, so the library and the tools run on machines without a GPU.
#pragma once

#include <cuda.h>

#include <string>
#include <vector>

#include "spark/spark.h"

namespace spark {

struct CudaDriver {
  CUresult (*Init)(unsigned);
  CUresult (*DriverGetVersion)(int*);
  CUresult (*DeviceGetCount)(int*);
  CUresult (*DeviceGet)(CUdevice*, int);
  CUresult (*DeviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*DeviceGetName)(char*, int, CUdevice);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*DevicePrimaryCtxRelease)(CUdevice);
  CUresult (*CtxPushCurrent)(CUcontext);
  CUresult (*CtxPopCurrent)(CUcontext*);
  CUresult (*ModuleLoadData)(CUmodule*, const void*);
  CUresult (*ModuleUnload)(CUmodule);
  CUresult (*ModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*FuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*LaunchKernelEx)(const CUlaunchConfig*, CUfunction, void**, void**);
  CUresult (*StreamIsCapturing)(CUstream, CUstreamCaptureStatus*);
  CUresult (*OccupancyMaxActiveBlocksPerMultiprocessor)(int*, CUfunction, int, size_t);
  CUresult (*GetErrorName)(CUresult, const char**);
};

// The loaded driver (initialised with cuInit), or throws NO_DEVICE with the reason.
const CudaDriver& cuda_driver();

// What `spark-cache info` reports about the driver; never throws.  Without libcuda,
// loaded is false and problem says why; with it but no usable GPU (cuInit failed), the
// version is still read and gpus is empty.
struct DriverInfo {
  struct Gpu {
    int ordinal = 0;
    std::string name;
    int compute_capability = 0;  // 90 for 9.0; 0 when it could not be read
  };
  bool loaded = false;
  std::string path;   // the library file, as the loader resolved it
  int version = 0;    // cuDriverGetVersion: 13000 for 13.0
  std::vector<Gpu> gpus;
  std::string problem;
};
DriverInfo cuda_driver_info();

// "CUDA_ERROR_INVALID_VALUE"
std::string cu_result_name(CUresult rc);

// The status of a failed driver call: OUT_OF_MEMORY for CUDA_ERROR_OUT_OF_MEMORY (a device
// allocation failed), CUDA for anything else.
spark_status cu_status(CUresult rc);

// Throws spark::Error(cu_status(rc)): "<call> failed: <CUresult name>", or with a subject
// "<call> failed for <subject>: <CUresult name>".
[[noreturn]] void throw_cu_error(CUresult rc, const char* call, const std::string& subject, const char* file,
                                 int line);

}  // namespace spark

// SPARK_CU_CHECK(ModuleUnload, module) calls cuda_driver().ModuleUnload(module) and throws
// when it fails, naming the entry point by its CUDA name ("cuModuleUnload failed: ...").
#define SPARK_CU_CHECK(fn, ...) SPARK_CU_CHECK_FOR(std::string(), fn, __VA_ARGS__)

// The same, naming what the call was for ("cuModuleLoadData failed for <key>: ...").
#define SPARK_CU_CHECK_FOR(subject, fn, ...)                                                        \
  do {                                                                                              \
    const CUresult rc_ = ::spark::cuda_driver().fn(__VA_ARGS__);                                    \
    if (rc_ != CUDA_SUCCESS) ::spark::throw_cu_error(rc_, "cu" #fn, (subject), __FILE__, __LINE__); \
  } while (0)

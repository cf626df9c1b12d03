// The CUDA Driver API, loaded with dlopen("libcuda.so.1") on first use: nothing links
// libcuda, so the library and the tools run on machines without a GPU.
#pragma once

#include <cuda.h>

#include <string>

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

// "CUDA_ERROR_INVALID_VALUE"
std::string cu_result_name(CUresult rc);

}  // namespace spark

// Throws spark::Error(CUDA) naming the call and the CUresult.
#define SPARK_CU_CHECK(call)                                                                   \
  do {                                                                                         \
    const CUresult rc_ = (call);                                                               \
    SPARK_CHECK(rc_ == CUDA_SUCCESS,                                                           \
                rc_ == CUDA_ERROR_OUT_OF_MEMORY ? SPARK_ERROR_OUT_OF_MEMORY : SPARK_ERROR_CUDA, \
                "{} failed: {}", #call, ::spark::cu_result_name(rc_));                         \
  } while (0)

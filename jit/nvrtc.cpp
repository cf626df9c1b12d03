#include "jit/nvrtc.h"

#include <cuda.h>  // CUDA_VERSION: the toolkit this library was built with

#include "core/dynlib.h"
#include "core/env.h"
#include "core/error.h"

namespace spark {

const Nvrtc& nvrtc_api() {
  static const Nvrtc api = [] {
    Nvrtc n;
    // The library the loader finds by its soname, else the one of the toolkit this was built with.
    const std::string soname = fmt::format("libnvrtc.so.{}", CUDA_VERSION / 1000);
    const auto named = env_string("SPARK_NVRTC_LIBRARY");
    std::string file = named.value_or(soname);
    void* lib = open_library(file, "NVRTC", n.error);
    if (!lib && !named) {
      file = std::string(SPARK_CUDA_LIBRARY_DIR) + "/" + soname;
      n.error.clear();
      lib = open_library(file, "NVRTC", n.error);
    }
    if (!lib) return n;
    const auto bind = [&](const char* name, auto& fn) { bind_symbol(lib, file, name, fn, n.error); };
    bind("nvrtcVersion", n.Version);
    bind("nvrtcGetErrorString", n.GetErrorString);
    bind("nvrtcCreateProgram", n.CreateProgram);
    bind("nvrtcDestroyProgram", n.DestroyProgram);
    bind("nvrtcCompileProgram", n.CompileProgram);
    bind("nvrtcGetProgramLogSize", n.GetProgramLogSize);
    bind("nvrtcGetProgramLog", n.GetProgramLog);
    bind("nvrtcGetPTXSize", n.GetPTXSize);
    bind("nvrtcGetPTX", n.GetPTX);
    bind("nvrtcGetCUBINSize", n.GetCUBINSize);
    bind("nvrtcGetCUBIN", n.GetCUBIN);
    n.GetNumSupportedArchs = reinterpret_cast<decltype(n.GetNumSupportedArchs)>(::dlsym(lib, "nvrtcGetNumSupportedArchs"));
    n.GetSupportedArchs = reinterpret_cast<decltype(n.GetSupportedArchs)>(::dlsym(lib, "nvrtcGetSupportedArchs"));
    Dl_info where{};
    n.path = n.Version && ::dladdr(reinterpret_cast<void*>(n.Version), &where) && where.dli_fname ? where.dli_fname
                                                                                                   : file;
    return n;
  }();
  return api;
}

// NVRTC for a compile; throws COMPILE saying why where it cannot be loaded.
const Nvrtc& nvrtc() {
  const Nvrtc& n = nvrtc_api();
  SPARK_CHECK(n.error.empty(), SPARK_ERROR_COMPILE, "{}; kernels not already in the cache cannot be compiled",
              n.error);
  return n;
}

std::string nvrtc_version() {
  // Without NVRTC, the version of the toolkit this library was built with: a cache
  // prewarmed by that NVRTC still hits.
  if (!nvrtc_api().error.empty()) return nvrtc_built_version();
  int major = 0, minor = 0;
  SPARK_NVRTC_CHECK(nvrtc().Version(&major, &minor));
  return fmt::format("{}.{}", major, minor);
}

std::string nvrtc_built_version() { return fmt::format("{}.{}", CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10); }

NvrtcInfo nvrtc_info() {
  const Nvrtc& n = nvrtc_api();
  NvrtcInfo info;
  info.problem = n.error;
  if (!n.error.empty()) return info;
  info.path = n.path;
  int major = 0, minor = 0;
  if (n.Version(&major, &minor) != NVRTC_SUCCESS) {
    info.problem = "nvrtcVersion failed";
    return info;
  }
  info.loaded = true;
  info.version = fmt::format("{}.{}", major, minor);
  int count = 0;
  if (n.GetNumSupportedArchs && n.GetSupportedArchs && n.GetNumSupportedArchs(&count) == NVRTC_SUCCESS && count > 0 &&
      count < 1024) {
    info.archs.resize(static_cast<size_t>(count));
    if (n.GetSupportedArchs(info.archs.data()) != NVRTC_SUCCESS) info.archs.clear();
  }
  return info;
}

}  // namespace spark

// NVRTC, opened at run time: its entry points, its version, and what `--version` and
// `spark-cache info` say of it.  Needs no GPU.
#pragma once

#include <nvrtc.h>

#include <string>
#include <vector>

#include "core/error.h"

namespace spark {

// NVRTC, loaded at first use rather than linked: a process that only loads cached kernels
// (SPARK_JIT=0 after a prewarm) runs where no NVRTC is installed.  SPARK_NVRTC_LIBRARY names
// another library file.
struct Nvrtc {
  decltype(&::nvrtcVersion) Version = nullptr;
  decltype(&::nvrtcGetErrorString) GetErrorString = nullptr;
  decltype(&::nvrtcCreateProgram) CreateProgram = nullptr;
  decltype(&::nvrtcDestroyProgram) DestroyProgram = nullptr;
  decltype(&::nvrtcCompileProgram) CompileProgram = nullptr;
  decltype(&::nvrtcGetProgramLogSize) GetProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) GetProgramLog = nullptr;
  decltype(&::nvrtcGetPTXSize) GetPTXSize = nullptr;
  decltype(&::nvrtcGetPTX) GetPTX = nullptr;
  decltype(&::nvrtcGetCUBINSize) GetCUBINSize = nullptr;
  decltype(&::nvrtcGetCUBIN) GetCUBIN = nullptr;
  // Optional (reported by `spark-cache info`, never needed for a compile).
  decltype(&::nvrtcGetNumSupportedArchs) GetNumSupportedArchs = nullptr;
  decltype(&::nvrtcGetSupportedArchs) GetSupportedArchs = nullptr;
  std::string path;   // the file loaded, as the loader resolved it
  std::string error;  // why it is not available; empty when it is
};

// The loaded library, or one whose `error` says why there is none; never throws.
const Nvrtc& nvrtc_api();
// NVRTC for a compile; throws COMPILE saying why where it cannot be loaded.
const Nvrtc& nvrtc();

#define SPARK_NVRTC_CHECK(call)                                                                                 \
  do {                                                                                                          \
    const nvrtcResult rc_ = (call);                                                                             \
    SPARK_CHECK(rc_ == NVRTC_SUCCESS, SPARK_ERROR_COMPILE, "{} failed: {}", #call, nvrtc().GetErrorString(rc_)); \
  } while (0)

// "13.0": the NVRTC loaded, else (none found) nvrtc_built_version().
std::string nvrtc_version();
// "13.0": the CUDA toolkit this library was built with.
std::string nvrtc_built_version();

// The NVRTC this process loads (or would), for `--version` and `spark-cache info`.  Never
// throws: a missing library is `problem`.
struct NvrtcInfo {
  bool loaded = false;
  std::string version;      // "13.0"
  std::string path;         // the library file, as the loader resolved it
  std::vector<int> archs;   // nvrtcGetSupportedArchs: 90, 100, ... (empty if it cannot say)
  std::string problem;      // why it is not loaded
};
NvrtcInfo nvrtc_info();

}  // namespace spark

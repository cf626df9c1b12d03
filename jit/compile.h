// Rendered source -> cubin, with NVRTC.  Needs no GPU.
#pragma once

#include <string>
#include <vector>

#include "ops/mla_qproj/render.h"

namespace spark {

// Per-thread resources of the compiled kernel, read from ptxas' report.
struct KernelResources {
  int registers = -1;
  int shared_static_bytes = -1;
  int local_bytes = -1;  // stack frame
  int spill_bytes = -1;  // spill stores + loads
};

struct CompiledKernel {
  std::string cubin;  // ELF bytes
  std::string log;    // NVRTC + ptxas log
  std::vector<std::string> options;
  KernelResources resources;
  double compile_ms = 0;
};

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
// The exact options a key is compiled with (part of the cache key).
std::vector<std::string> compile_options(const std::string& arch);
// Throws COMPILE with the NVRTC log on failure.  Honours SPARK_DUMP_DIR.
CompiledKernel compile(const RenderedSource& src);
// Parses "ptxas info : Used N registers ..." lines (exposed for tests).
KernelResources parse_ptxas_report(const std::string& log);

}  // namespace spark

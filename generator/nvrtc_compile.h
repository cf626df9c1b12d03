// Rendered source -> cubin, with NVRTC.  Needs no GPU.
#pragma once

#include <string>
#include <vector>

#include "generator/render.h"

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

// "13.0"
std::string nvrtc_version();
// The exact options a key is compiled with (part of the cache key).
std::vector<std::string> compile_options(const std::string& arch);
// Throws COMPILE with the NVRTC log on failure.  Honours SPARK_DUMP_DIR.
CompiledKernel compile(const RenderedSource& src);
// Parses "ptxas info : Used N registers ..." lines (exposed for tests).
KernelResources parse_ptxas_report(const std::string& log);

}  // namespace spark

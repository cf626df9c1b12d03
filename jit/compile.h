// Kernel spec -> cubin, with NVRTC (jit/nvrtc.h).  Needs no GPU.
#pragma once

#include <string>
#include <vector>

#include "core/cubin_elf.h"
#include "jit/kernel_spec.h"
#include "jit/nvrtc.h"

namespace spark {

struct CompiledKernel {
  std::string cubin;  // ELF bytes
  std::string log;    // NVRTC + ptxas log
  std::vector<std::string> options;
  KernelResources resources;
  double compile_ms = 0;
};

// The exact options a kernel for `arch` is compiled with (part of the cache key).
std::vector<std::string> compile_options(const std::string& arch);
// Compiles spec.source for spec.arch with the embedded templates as headers.  Throws
// COMPILE with the NVRTC log on failure.  Honours SPARK_DUMP_DIR.
CompiledKernel compile(const KernelSpec& spec);
// Parses "ptxas info : Used N registers ..." lines (exposed for tests).
KernelResources parse_ptxas_report(const std::string& log);

}  // namespace spark

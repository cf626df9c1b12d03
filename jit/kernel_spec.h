// A kernel as the JIT core sees it, whatever op made it: the contract between an op's
// renderer and compile -> cache entry -> loaded kernel -> launch (docs/architecture.md).
#pragma once

#include <string>

namespace spark {

struct KernelSpec {
  // The key's canonical name (core/key_name.h): "<op>.<fields>.<arch>".  It names the cache
  // entry; the kernel's __global__ function is kernel_symbol(op) and it is compiled for arch.
  std::string key;
  std::string arch;          // the key's last field, e.g. "sm_90a"
  int generator_version = 0; // the op's renderer version; part of the cache key
  std::string source;        // CUDA C++; may include the embedded templates (jit/templates.h)
  std::string summary;       // one line on the kernel's shape (the manifest's "tile")
  int threads = 0;           // per CTA
  int smem_bytes = 0;        // dynamic shared memory per CTA
};

}  // namespace spark

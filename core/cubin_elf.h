// What spark reads from a cubin (an ELF image for one GPU arch) without a GPU: whether it
// is a cubin for a given arch holding spark's kernel, and the kernel's resources.  Every
// offset is bounds-checked: a cubin read from a cache or an archive is untrusted input.
#pragma once

#include <string>
#include <string_view>


namespace spark {

// Per-thread resources of a compiled kernel (ptxas' report, else the cubin; -1: not known).
struct KernelResources {
  int registers = -1;
  int shared_static_bytes = -1;
  int local_bytes = -1;  // stack frame
  int spill_bytes = -1;  // spill stores + loads
};

// Empty when `cubin` is a 64-bit little-endian CUDA ELF executable for `arch` ("sm_90a":
// the SM number in its header is 90) whose section headers lie inside it and whose symbol
// table names `kernel`; else what is wrong.  A cubin for another arch would fail to load or,
// worse, be loaded by a driver that accepts it.
std::string cubin_problem(std::string_view cubin, std::string_view arch, std::string_view kernel);

// Registers and stack frame of `kernel` from the cubin's .nv.info attributes
// (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE), static shared memory from .nv.shared.<kernel>.
// Fills only what ptxas' report left at -1, so the resources are known even where NVRTC
// prints no ptxas report.  Spill counts exist only in that report.
void fill_resources_from_cubin(std::string_view cubin, std::string_view kernel, KernelResources& r);

}  // namespace spark

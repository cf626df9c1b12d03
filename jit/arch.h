// The GPU targets spark compiles for, and their limits.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace spark {

// A compile target NVRTC can build for, with the limits the heuristics respect.
struct ArchInfo {
  std::string_view name;     // "sm_90a"
  int compute_capability;    // 90
  int max_smem_per_block;    // opt-in dynamic shared memory, bytes
};

const std::vector<ArchInfo>& supported_archs();
// "sm_80, sm_86, ..." (every target supported_archs() lists).
std::string supported_arch_names();
// Throws UNSUPPORTED for an arch spark does not target.
const ArchInfo& arch_info(std::string_view arch);
// The arch spark compiles for on a device of this compute capability (e.g. 90 -> sm_90a).
std::string arch_for_compute_capability(int cc);

}  // namespace spark

#include "jit/arch.h"

#include "core/error.h"

namespace spark {

const std::vector<ArchInfo>& supported_archs() {
  // Every target NVRTC 13 builds that has what the kernels use (bf16 mma.sync, cp.async:
  // sm_80 and up; so not sm_75).  The shared memory is the opt-in maximum per block of the
  // compute capability (CUDA C++ Programming Guide, "Technical Specifications"): 163 KB on
  // 8.0 and 8.7, 99 KB on 8.6, 8.9 and 12.x, 227 KB on 9.0, 10.x and 11.0.  The
  // arch-specific "a" targets run only on their exact compute capability, the others on any
  // later minor version of their major.  sm_88 is left out until a device to check its
  // limits on exists.
  static const std::vector<ArchInfo> kArchs = {
      {"sm_80", 80, 166912},    {"sm_86", 86, 101376},    {"sm_87", 87, 166912},    {"sm_89", 89, 101376},
      {"sm_90", 90, 232448},    {"sm_90a", 90, 232448},   {"sm_100a", 100, 232448}, {"sm_103a", 103, 232448},
      {"sm_110a", 110, 232448}, {"sm_120a", 120, 101376}, {"sm_121a", 121, 101376},
  };
  return kArchs;
}

std::string supported_arch_names() {
  std::string names;
  for (const ArchInfo& a : supported_archs()) names += fmt::format("{}{}", names.empty() ? "" : ", ", a.name);
  return names;
}

const ArchInfo& arch_info(std::string_view arch) {
  for (const ArchInfo& a : supported_archs())
    if (a.name == arch) return a;
  SPARK_FAIL(SPARK_ERROR_UNSUPPORTED, "arch '{}' is not supported (supported: {})", arch, supported_arch_names());
}

std::string arch_for_compute_capability(int cc) {
  switch (cc) {
    case 80: return "sm_80";
    case 86: return "sm_86";
    case 87: return "sm_87";
    case 89: return "sm_89";
    case 90: return "sm_90a";
    case 100: return "sm_100a";
    case 103: return "sm_103a";
    case 110: return "sm_110a";
    case 120: return "sm_120a";
    case 121: return "sm_121a";
    default: break;
  }
  SPARK_FAIL(SPARK_ERROR_UNSUPPORTED, "compute capability {}.{} has no spark target", cc / 10, cc % 10);
}

}  // namespace spark

// One launch of a loaded kernel, for any op: the op computes its grid and params, this
// sets up the launch (block, dynamic shared memory, programmatic dependent launch).
#pragma once

#include "runtime/context.h"

namespace spark {

struct LaunchSpec {
  unsigned grid_x = 1;     // CTAs (1-D grid)
  void* params = nullptr;  // the address of the kernel's single by-value params struct
  CUstream stream = nullptr;
  bool pdl = false;        // programmatic stream serialisation, where the device has it (sm_90+)
};

// Launches on the stream; the context must be current.  Throws CUDA with the kernel's name.
void launch(const Context& ctx, const LoadedKernel& kernel, const LaunchSpec& spec);

}  // namespace spark

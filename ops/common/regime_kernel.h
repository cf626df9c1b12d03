// A plan's kernel for one M-regime, shared by every op's plan: loaded when the plan is made,
// or, for a lazy plan, at the regime's first run, which must not happen inside a CUDA graph
// capture (a load or compile would break or stall it).
#pragma once

#include <atomic>

#include "jit/kernel_spec.h"
#include "ops/common/formats.h"
#include "runtime/context.h"

namespace spark {

// The kernel held in `slot`, loading `spec` into it first if it is empty.  An empty slot on a
// capturing stream is NOT_LOADED_WHILE_CAPTURING, with nothing loaded or launched.
const LoadedKernel& regime_kernel(Context& ctx, std::atomic<const LoadedKernel*>& slot, const KernelSpec& spec,
                                  const MRegime& regime, CUstream stream);

}  // namespace spark

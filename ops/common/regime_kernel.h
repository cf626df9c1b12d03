// A plan's kernel for one M-regime, shared by every op's plan: loaded when the plan is made,
// or, for a lazy plan, at the regime's first run, which must not happen inside a CUDA graph
// capture (a load or compile would break or stall it).
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "core/error.h"
#include "jit/kernel_spec.h"
#include "ops/common/formats.h"
#include "runtime/context.h"

namespace spark {

// The kernel held in `slot`, loading `spec` into it first if it is empty.  An empty slot on a
// capturing stream is NOT_LOADED_WHILE_CAPTURING, with nothing loaded or launched.
const LoadedKernel& regime_kernel(Context& ctx, std::atomic<const LoadedKernel*>& slot, const KernelSpec& spec,
                                  const MRegime& regime, CUstream stream);

// A plan's kernels, one per M-regime in order of M: each regime's rendered source (an op's
// KernelSpec with its key in op_key, whose regime says which M it serves) and, once loaded,
// its kernel.  Filled when the plan is made; read by any number of threads running it.
template <class Rendered>
class RegimeSlots {
 public:
  struct Picked {
    const Rendered& rendered;
    const LoadedKernel& kernel;
  };

  // Appends a regime's source, loading its kernel now unless the plan is lazy.
  void add(Context& ctx, Rendered rendered, bool lazy) {
    auto slot = std::make_unique<Slot>();
    slot->rendered = std::move(rendered);
    if (!lazy) slot->kernel.store(&ctx.load(slot->rendered, "plan creation"), std::memory_order_release);
    slots_.push_back(std::move(slot));
  }

  // The source and kernel of the regime serving m, loaded now if the plan is lazy
  // (regime_kernel's rules); the caller has made the context current.
  Picked pick(Context& ctx, int m, CUstream stream) {
    for (const auto& s : slots_)
      if (s->rendered.op_key.regime.contains(m))
        return {s->rendered, regime_kernel(ctx, s->kernel, s->rendered, s->rendered.op_key.regime, stream)};
    SPARK_FAIL(SPARK_ERROR_INTERNAL, "no regime covers m = {}", m);
  }

 private:
  struct Slot {
    Rendered rendered;
    std::atomic<const LoadedKernel*> kernel{nullptr};
  };
  std::vector<std::unique_ptr<Slot>> slots_;  // stable addresses: threads hold their kernels
};

}  // namespace spark

#include "ops/common/regime_kernel.h"

#include "core/error.h"

namespace spark {

const LoadedKernel& regime_kernel(Context& ctx, std::atomic<const LoadedKernel*>& slot, const KernelSpec& spec,
                                  const MRegime& regime, CUstream stream) {
  if (const LoadedKernel* k = slot.load(std::memory_order_acquire)) return *k;
  // Only lazy plans get here.  Loading or compiling inside a capture would either break
  // the capture or stall it; refuse instead, before touching anything.
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  SPARK_CU_CHECK(StreamIsCapturing, stream, &capture);
  SPARK_CHECK(capture == CU_STREAM_CAPTURE_STATUS_NONE, SPARK_ERROR_NOT_LOADED_WHILE_CAPTURING,
              "kernel {} is not loaded and the stream is capturing a CUDA graph; run this M once outside "
              "the capture or create the plan with lazy = 0",
              spec.key);
  const LoadedKernel& k =
      ctx.load(spec, fmt::format("the first run of a lazy plan at M {}-{}", regime.m_min, regime.m_max));
  slot.store(&k, std::memory_order_release);
  return k;
}

}  // namespace spark

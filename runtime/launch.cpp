#include "runtime/launch.h"

#include "core/error.h"

namespace spark {

void launch(const Context& ctx, const LoadedKernel& k, const LaunchSpec& spec) {
  CUlaunchConfig cfg{};
  void* params[] = {spec.params};
  cfg.gridDimX = spec.grid_x;
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = static_cast<unsigned>(k.threads);
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = static_cast<unsigned>(k.smem_bytes);
  cfg.hStream = spec.stream;
  CUlaunchAttribute attr{};
  if (spec.pdl && ctx.compute_capability() >= 90) {
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  SPARK_CU_CHECK_FOR(k.key, LaunchKernelEx, &cfg, k.function, params, nullptr);
}

}  // namespace spark

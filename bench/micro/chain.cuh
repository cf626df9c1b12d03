// What the micro-benchmarks that time launches share (mixbw.cu, skeleton.cu, pdl_timeline.cu,
// oproj_timeline.cu): error checks, event-timed medians, a launch with or without programmatic
// dependent launch, the per-layer time of a CUDA graph of launches, and the copy ceiling as
// spark-bench measures it.
// Each including file is still built on its own: nvcc -O3 -std=c++17 -arch=sm_90a FILE.cu.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#define CHECK_CUDA(x)                                                                         \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

// One launch of `grid` CTAs of `threads`, with the PDL attribute when `pdl`.
template <class Kernel, class... P>
void launch(bool pdl, int grid, int threads, size_t smem, cudaStream_t s, Kernel k, P... p) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = pdl ? 1 : 0;
  CHECK_CUDA(cudaLaunchKernelEx(&cfg, k, p...));
}

// Median of 25 event-timed runs of run() on `s` (after 3 more), in ms.
template <class Run>
double median_ms(cudaStream_t s, Run run) {
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int rep = 0; rep < 28; ++rep) {
    CHECK_CUDA(cudaEventRecord(e0, s));
    run();
    CHECK_CUDA(cudaEventRecord(e1, s));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
    if (rep >= 3) ms.push_back(t);
  }
  CHECK_CUDA(cudaEventDestroy(e0));
  CHECK_CUDA(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// µs per layer: a graph of `layers` launches (enqueue(l) each), median of 25 replays after 3.
template <class Enqueue>
double per_layer_us(cudaStream_t s, int layers, Enqueue enqueue) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int l = 0; l < layers; ++l) enqueue(l);
  CHECK_CUDA(cudaStreamEndCapture(s, &g));
  CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
  const double ms = median_ms(s, [&] { CHECK_CUDA(cudaGraphLaunch(ge, s)); });
  CHECK_CUDA(cudaGraphExecDestroy(ge));
  CHECK_CUDA(cudaGraphDestroy(g));
  return ms * 1e3 / layers;
}

// The copy ceiling as spark-bench measures it, in TB/s: cudaMemcpy device to device of 512 MiB,
// bytes read + written, median of 25 copies after 3.  Outside a graph: captured, the copy
// would become a node run by the copy engines.
inline double copy_ceiling_tbps(cudaStream_t s) {
  const size_t copy_bytes = size_t(1) << 29;
  void *src = nullptr, *dst = nullptr;
  CHECK_CUDA(cudaMalloc(&src, copy_bytes));
  CHECK_CUDA(cudaMalloc(&dst, copy_bytes));
  const double ms =
      median_ms(s, [&] { CHECK_CUDA(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice, s)); });
  CHECK_CUDA(cudaFree(src));
  CHECK_CUDA(cudaFree(dst));
  return 2.0 * copy_bytes / (ms * 1e-3) / 1e12;
}

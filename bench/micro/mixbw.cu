// DRAM bandwidth of a mixed stream of reads and writes, by the fraction of its bytes that are
// writes: 0 (read only), 0.5 (a copy), up to 1 (write only).  spark's rows at M >= 256 write
// 45-65 % of their bytes (H = 128, K = 192, M = 1024 with bf16 output: 62 %), so this says how
// far the copy ceiling spark-bench measures (cudaMemcpy) is reachable at those mixes.
// One resident grid of eight 256-thread CTAs per SM; CTA b writes when b % 16 < 16 x the
// fraction, else reads, each side streaming its own buffer, four 16-byte plain loads or
// stores per thread per step.  "/ copy" divides by cudaMemcpy's device-to-device rate (bytes
// read + written), the ceiling spark-bench measures.
// Build and run on the GPU machine (chain.cuh beside it): nvcc -O3 -arch=sm_90a mixbw.cu -o mixbw && ./mixbw
#include <cstdint>

#include "chain.cuh"

constexpr int kThreads = 256, kSlots = 16, kUnroll = 4;

__global__ void __launch_bounds__(kThreads) mixed(const uint4* src, size_t read_vecs, uint4* dst, size_t write_vecs,
                                                  int writer_slots, unsigned* sink) {
  const int slot = blockIdx.x % kSlots, group = blockIdx.x / kSlots, groups = gridDim.x / kSlots;
  const bool writer = slot < writer_slots;
  const int sides = writer ? writer_slots : kSlots - writer_slots;
  const int index = group * sides + (writer ? slot : slot - writer_slots);  // among this side's CTAs
  const size_t ctas = static_cast<size_t>(groups) * sides;
  const size_t vecs = writer ? write_vecs : read_vecs;
  const size_t stride = ctas * kThreads * kUnroll;
  size_t i = (static_cast<size_t>(index) * kThreads * kUnroll) + threadIdx.x;
  if (writer) {
    const uint4 v = make_uint4(blockIdx.x, threadIdx.x, 0x12345678u, 0x9abcdef0u);
    for (; i + (kUnroll - 1) * kThreads < vecs; i += stride)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) dst[i + u * kThreads] = v;
  } else {
    unsigned acc = 0;
    for (; i + (kUnroll - 1) * kThreads < vecs; i += stride) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = src[i + u * kThreads];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    if (acc == 0x5eed5eedu) sink[0] = acc;  // keeps the loads
  }
}

// The copy as a kernel: each thread reads four vectors and writes them back elsewhere.
__global__ void __launch_bounds__(kThreads) copy(const uint4* src, uint4* dst, size_t vecs) {
  const size_t stride = static_cast<size_t>(gridDim.x) * kThreads * kUnroll;
  for (size_t i = static_cast<size_t>(blockIdx.x) * kThreads * kUnroll + threadIdx.x;
       i + (kUnroll - 1) * kThreads < vecs; i += stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = src[i + u * kThreads];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) dst[i + u * kThreads] = v[u];
  }
}

// TB/s of `bytes` moved by launch() on the default stream: chain.cuh's median of 25 timed runs.
template <class Launch>
double rate_tbps(size_t bytes, Launch launch) {
  const double ms = median_ms(0, [&] {
    launch();
    CHECK_CUDA(cudaGetLastError());
  });
  return bytes / (ms * 1e-3) / 1e12;
}

int main() {
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const size_t total = size_t(1) << 30;  // bytes moved per launch, far past the L2
  uint4 *src = nullptr, *dst = nullptr;
  unsigned* sink = nullptr;
  CHECK_CUDA(cudaMalloc(&src, total));
  CHECK_CUDA(cudaMalloc(&dst, total));
  CHECK_CUDA(cudaMalloc(&sink, 4));
  CHECK_CUDA(cudaMemset(src, 1, total));
  CHECK_CUDA(cudaMemset(dst, 0, total));
  const int grid = sms * 8 / kSlots * kSlots;  // eight CTAs per SM, whole groups of kSlots
  std::printf("%s, %d SMs, %d CTAs of %d threads, %zu MiB per launch, median of 25\n", prop.name, sms, grid,
              kThreads, total >> 20);
  const double copy_tbps =
      rate_tbps(total, [&] { CHECK_CUDA(cudaMemcpyAsync(dst, src, total / 2, cudaMemcpyDeviceToDevice)); });
  std::printf("cudaMemcpy device to device: %.2f TB/s\n", copy_tbps);
  for (int per_sm : {2, 4, 8}) {
    const double tbps = rate_tbps(total, [&] { copy<<<sms * per_sm, kThreads>>>(src, dst, total / 2 / 16); });
    std::printf("copy kernel, %d CTAs per SM: %.2f TB/s (%.3f of cudaMemcpy)\n", per_sm, tbps, tbps / copy_tbps);
  }
  std::printf("writes  writer CTAs  TB/s   / copy\n");
  for (int writers = 0; writers <= kSlots; ++writers) {
    const double fraction = double(writers) / kSlots;
    const size_t write_bytes = static_cast<size_t>(fraction * total) / 4096 * 4096;
    const size_t read_bytes = total - write_bytes;
    const double tbps = rate_tbps(total, [&] {
      mixed<<<grid, kThreads>>>(src, read_bytes / 16, dst, write_bytes / 16, writers, sink);
    });
    std::printf("%5.3f  %11d  %5.2f  %5.3f\n", fraction, writers, tbps, tbps / copy_tbps);
  }
  return 0;
}

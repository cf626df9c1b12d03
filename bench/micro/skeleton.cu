// What one launch per layer costs at decode when the kernel does nothing but move the layer's
// bytes the way spark's decode kernel does: a CTA per (head, BN-column block) requests its
// K x BN weight columns into shared memory (16-byte cp.async) before waiting on the previous
// layer (griddepcontrol.wait, with programmatic dependent launch), then lets the next layer
// launch, reads its q rows, and writes its M x BN outputs (the first block also the RoPE
// columns) from the weights and q, with no MMA.  Per layer its own weights, in CUDA-graph
// replay over enough layers that the weights are >= 4x the L2, median of 25 replays; PDL on
// and off; 32-, 64- and 128-column blocks.  A shape's spark time minus this skeleton's is what
// the tiles' MMAs and epilogue cost on top of the launch chain and the bytes.
// Build and run on the GPU machine (chain.cuh beside it):
//   nvcc -O3 -std=c++17 -arch=sm_90a skeleton.cu -o skeleton && ./skeleton
#include <cstdint>

#include "chain.cuh"

constexpr int kThreads = 256, kN = 512, kR = 64;

struct Args {
  const uint16_t* w;     // [H, K, kN] of this layer
  const uint16_t* q;     // [M, H, K]
  const uint16_t* q_pe;  // [M, H, kR]
  uint16_t* out;         // [M, H, kN + kR]
  int heads, k, m, bn;
};

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__global__ void __launch_bounds__(kThreads) skeleton(Args a) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int blocks_n = kN / a.bn;
  const int h = blockIdx.x / blocks_n, n0 = blockIdx.x % blocks_n * a.bn;
  // The weights first: they do not depend on the previous layer.
  const int vecs_row = a.bn / 8, vecs = a.k * vecs_row;
  for (int i = threadIdx.x; i < vecs; i += kThreads) {
    const int r = i / vecs_row, c = i % vecs_row;
    const uint16_t* src = a.w + (static_cast<size_t>(h) * a.k + r) * kN + n0 + c * 8;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(smem + i * 16)), "l"(src) : "memory");
  }
  asm volatile("cp.async.commit_group;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  // One q value per output column and row (a dependency on q, as the MMAs have).
  uint32_t qsum = 0;
  for (int i = threadIdx.x; i < a.m * (a.k / 8); i += kThreads) {
    const uint4 v = *reinterpret_cast<const uint4*>(a.q + (static_cast<size_t>(i / (a.k / 8)) * a.heads + h) * a.k +
                                                    i % (a.k / 8) * 8);
    qsum ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  asm volatile("cp.async.wait_all;\n" ::: "memory");
  __syncthreads();
  const uint4* ws = reinterpret_cast<const uint4*>(smem);
  for (int i = threadIdx.x; i < a.m * vecs_row; i += kThreads) {
    const int m = i / vecs_row, c = i % vecs_row;
    uint4 v = ws[(m % a.k) * vecs_row + c];
    v.x ^= qsum;
    *reinterpret_cast<uint4*>(a.out + (static_cast<size_t>(m) * a.heads + h) * (kN + kR) + n0 + c * 8) = v;
  }
  if (n0 == 0)
    for (int i = threadIdx.x; i < a.m * (kR / 8); i += kThreads) {
      const int m = i / (kR / 8), c = i % (kR / 8);
      *reinterpret_cast<uint4*>(a.out + (static_cast<size_t>(m) * a.heads + h) * (kN + kR) + kN + c * 8) =
          *reinterpret_cast<const uint4*>(a.q_pe + (static_cast<size_t>(m) * a.heads + h) * kR + c * 8);
    }
}

// A chain link that moves nothing: wait, let the next launch, one store per thread.
__global__ void __launch_bounds__(kThreads) empty_link(uint32_t* out) {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  out[blockIdx.x * kThreads + threadIdx.x] = threadIdx.x;
}

int main() {
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK_CUDA(cudaFuncSetAttribute(skeleton, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));

  const double ceiling_tbps = copy_ceiling_tbps(s);

  uint32_t* sink = nullptr;
  CHECK_CUDA(cudaMalloc(&sink, size_t(sms) * 4 * kThreads * 4));
  std::printf(
      "%s, %d SMs; copy ceiling %.2f TB/s; per layer, graph replay, "
      "median of 25\n",
      prop.name, sms, ceiling_tbps);
  for (int per_sm : {1, 4}) {
    const int grid = sms * per_sm;
    const double off = per_layer_us(s, 64, [&](int) { launch(false, grid, kThreads, 0, s, empty_link, sink); });
    const double on = per_layer_us(s, 64, [&](int) { launch(true, grid, kThreads, 0, s, empty_link, sink); });
    std::printf("empty link, %4d CTAs: %.2f us PDL off, %.2f us PDL on\n", grid, off, on);
  }

  struct Shape {
    int heads, k, m;
  };
  const std::vector<Shape> shapes = {{8, 128, 1},   {8, 192, 1},    {16, 128, 1},   {16, 192, 1},  {16, 192, 16},
                                     {16, 192, 32}, {32, 192, 1},   {64, 128, 1},   {64, 192, 1},  {128, 128, 1},
                                     {128, 128, 4}, {128, 128, 16}, {128, 128, 32}, {128, 192, 1}, {128, 192, 32}};
  std::printf("  H    K   M   BN  CTAs  floor us  PDL off us  PDL on us  on/floor\n");
  for (const Shape& sh : shapes)
    for (int bn : {32, 64, 128}) {
      const size_t w_bytes = size_t(sh.heads) * sh.k * kN * 2;
      const int layers = std::max<int>(64, static_cast<int>((4 * prop.l2CacheSize + w_bytes - 1) / w_bytes));
      uint16_t *w = nullptr, *q = nullptr, *q_pe = nullptr, *out = nullptr;
      CHECK_CUDA(cudaMalloc(&w, w_bytes * layers));
      CHECK_CUDA(cudaMalloc(&q, size_t(sh.m) * sh.heads * sh.k * 2));
      CHECK_CUDA(cudaMalloc(&q_pe, size_t(sh.m) * sh.heads * kR * 2));
      CHECK_CUDA(cudaMalloc(&out, size_t(sh.m) * sh.heads * (kN + kR) * 2));
      CHECK_CUDA(cudaMemset(w, 1, w_bytes * layers));
      CHECK_CUDA(cudaMemset(q, 2, size_t(sh.m) * sh.heads * sh.k * 2));
      CHECK_CUDA(cudaMemset(q_pe, 3, size_t(sh.m) * sh.heads * kR * 2));
      const int grid = sh.heads * (kN / bn);
      const size_t smem = size_t(sh.k) * bn * 2;
      const auto enqueue = [&](bool pdl) {
        return [&, pdl](int l) {
          launch(pdl, grid, kThreads, smem, s, skeleton,
                 Args{w + w_bytes / 2 * l, q, q_pe, out, sh.heads, sh.k, sh.m, bn});
        };
      };
      const double off = per_layer_us(s, layers, enqueue(false));
      const double on = per_layer_us(s, layers, enqueue(true));
      const size_t bytes =
          w_bytes + size_t(sh.m) * sh.heads * (sh.k + kR) * 2 + size_t(sh.m) * sh.heads * (kN + kR) * 2;
      const double floor_us = bytes / (ceiling_tbps * 1e12) * 1e6;
      std::printf("%3d  %3d  %2d  %3d  %4d  %8.2f  %10.2f  %9.2f  %8.2f\n", sh.heads, sh.k, sh.m, bn, grid, floor_us,
                  off, on, on / floor_us);
      CHECK_CUDA(cudaFree(w));
      CHECK_CUDA(cudaFree(q));
      CHECK_CUDA(cudaFree(q_pe));
      CHECK_CUDA(cudaFree(out));
    }
  return 0;
}

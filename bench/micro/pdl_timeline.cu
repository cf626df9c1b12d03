// Where the period of a PDL chain goes when each layer's kernel must fetch its FP8 weights
// (the value up-projection's decode: H = 128, V = 128 or 256, L = 512, M = 1).  A stand-in
// kernel with the decode tile's shape — a CTA per (head, BN-column block) copies its BN x L
// weight bytes into shared memory (16-byte cp.async) before the PDL wait, then reads o, forms
// one dot product per column and stores the row — stamps %globaltimer in every CTA at entry,
// after the wait, when its weights have landed and at exit.  Per layer: first entry S, first
// release R (past the wait), last landing D, last exit E.  Printed medians over the middle
// layers of the last replay: the period E(l) - E(l-1); launch = S(l) - R(l-1) (how long after
// the previous layer's release this one's first CTA runs); fetch = D(l) - S(l); release =
// R(l) - E(l-1) (the chain's completion-to-release gap); tail = E(l) - max(R(l), D(l));
// early = the share of the layer's fetch time before the previous layer's exit; o/cta = a
// CTA's time from its release to its dot products (its o loads' round trip), averaged.
// The trigger (griddepcontrol.launch_dependents) is placed: after the wait (spark's place),
// first, once the CTA's own weights have landed, after its o loads were used, or nowhere (the
// CTA's exit); and the fetch can be left out.
// Build and run on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90a pdl_timeline.cu -o pdl_timeline && ./pdl_timeline
#include <algorithm>
#include <cstdint>
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

constexpr int kL = 512, kStamps = 5;
enum Trigger { kAfterWait = 0, kFirst = 1, kLanded = 2, kAfterO = 3, kAtExit = 4 };

struct Args {
  const uint8_t* w;    // [H, V, L] FP8 bytes of this layer
  const uint16_t* o;   // [H, L] bf16 (M = 1)
  uint16_t* out;       // [H * V]
  unsigned long long* stamps;  // [CTAs, kStamps] of this layer
  int v, bn, trigger, fetch;
};

__device__ __forceinline__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

__global__ void __launch_bounds__(256) link(Args a) {
  extern __shared__ __align__(16) uint8_t smem[];
  float* partial = reinterpret_cast<float*>(smem + a.bn * kL);
  const unsigned long long t_entry = now();
  if (a.trigger == kFirst) launch_dependents();
  const int blocks_n = a.v / a.bn, h = blockIdx.x / blocks_n, n0 = blockIdx.x % blocks_n * a.bn;
  const uint8_t* src = a.w + (static_cast<size_t>(h) * a.v + n0) * kL;  // BN whole rows: contiguous
  const int vecs = a.bn * kL / 16;
  if (a.fetch)
    for (int i = threadIdx.x; i < vecs; i += blockDim.x) {
      const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem + 16 * i));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src + 16 * i) : "memory");
    }
  asm volatile("cp.async.commit_group;" ::: "memory");
  // The landing is waited for before the PDL wait so that it can be stamped on its own; the
  // work after the wait needs the weights anyway.
  asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();
  const unsigned long long t_landed = now();
  if (a.trigger == kLanded) launch_dependents();
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const unsigned long long t_release = now();
  if (a.trigger == kAfterWait) launch_dependents();
  // One dot product per column: thread (segment s, column c) over its span of L, with four
  // 16-byte o loads requested together (they depend on the previous layer, as the real
  // tile's four a lane are) and used in turn along the span.
  const int c = threadIdx.x % a.bn, s = threadIdx.x / a.bn, span = kL / (blockDim.x / a.bn);
  const uint16_t* o = a.o + static_cast<size_t>(h) * kL + s * span;
  uint4 ov[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) ov[k] = *reinterpret_cast<const uint4*>(o + 8 * k);
  float sum = 0.0f;
  for (int k = 0; k < span / 8; k += 4)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint2 wv = *reinterpret_cast<const uint2*>(smem + c * kL + s * span + 8 * (k + j));
      const uint32_t ow[4] = {ov[j].x, ov[j].y, ov[j].z, ov[j].w};
      const uint32_t ww[2] = {wv.x, wv.y};
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float of = __uint_as_float((ow[e / 2] >> (16 * (e % 2))) << 16);
        sum += of * static_cast<float>(static_cast<int8_t>(ww[e / 4] >> (8 * (e % 4))));
      }
    }
  const unsigned long long t_o = now();
  if (a.trigger == kAfterO) launch_dependents();
  partial[s * a.bn + c] = sum;
  __syncthreads();
  if (threadIdx.x < a.bn) {
    float total = 0.0f;
    for (int k = 0; k < 256 / a.bn; ++k) total += partial[k * a.bn + threadIdx.x];
    a.out[static_cast<size_t>(h) * a.v + n0 + threadIdx.x] = static_cast<uint16_t>(__float_as_uint(total) >> 16);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long* st = a.stamps + static_cast<size_t>(blockIdx.x) * kStamps;
    st[0] = t_entry, st[1] = t_release, st[2] = t_landed, st[3] = now(), st[4] = t_o;
  }
}

struct Config {
  int v, bn, threads, trigger, fetch, pdl;
};

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x.empty() ? 0.0 : x[x.size() / 2];
}

int main() {
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaFuncSetAttribute(link, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024));
  const int heads = 128;

  // The copy ceiling as spark-bench measures it (bytes read + written by a device copy).
  const size_t copy_bytes = size_t(1) << 29;
  void *csrc = nullptr, *cdst = nullptr;
  CHECK_CUDA(cudaMalloc(&csrc, copy_bytes));
  CHECK_CUDA(cudaMalloc(&cdst, copy_bytes));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  std::vector<double> copy_us;
  for (int rep = 0; rep < 23; ++rep) {
    CHECK_CUDA(cudaEventRecord(e0, stream));
    CHECK_CUDA(cudaMemcpyAsync(cdst, csrc, copy_bytes, cudaMemcpyDeviceToDevice, stream));
    CHECK_CUDA(cudaEventRecord(e1, stream));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    if (rep >= 3) copy_us.push_back(ms * 1e3);
  }
  const double ceiling = 2.0 * copy_bytes / (median(copy_us) * 1e-6);  // bytes per second
  CHECK_CUDA(cudaFree(csrc));
  CHECK_CUDA(cudaFree(cdst));
  std::printf("%s, %d SMs, L2 %d MB; copy ceiling %.2f TB/s; H = %d, L = %d, M = 1, FP8 weights\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20, ceiling / 1e12, heads, kL);
  std::printf("  V   BN thr CTAs trigger   fetch PDL  us/layer floor  x floor | launch  fetch release  tail "
              "early   o/cta | (us, medians over layers)\n");

  static const char* trigger_names[] = {"after-wait", "first", "landed", "after-o", "at-exit"};
  std::vector<Config> configs;
  for (int v : {128, 256})
    for (int bn : {64, 128})
      for (int trigger : {kAfterWait, kFirst, kLanded, kAfterO, kAtExit})
        for (int fetch : {1, 0}) configs.push_back({v, bn, 256, trigger, fetch, 1});
  for (int v : {128, 256}) configs.push_back({v, 64, 256, kAfterWait, 1, 0});

  for (const Config& cf : configs) {
    const size_t w_bytes = size_t(heads) * cf.v * kL;
    const int layers = std::max<int>(64, static_cast<int>((4 * size_t(prop.l2CacheSize) + w_bytes - 1) / w_bytes));
    const int ctas = heads * cf.v / cf.bn;
    uint8_t* w = nullptr;
    uint16_t *o = nullptr, *out = nullptr;
    unsigned long long* stamps = nullptr;
    CHECK_CUDA(cudaMalloc(&w, w_bytes * layers));
    CHECK_CUDA(cudaMalloc(&o, size_t(heads) * kL * 2));
    CHECK_CUDA(cudaMalloc(&out, size_t(heads) * cf.v * 2 * layers));
    CHECK_CUDA(cudaMalloc(&stamps, size_t(layers) * ctas * kStamps * 8));
    CHECK_CUDA(cudaMemset(w, 0x11, w_bytes * layers));
    CHECK_CUDA(cudaMemset(o, 0x3c, size_t(heads) * kL * 2));
    const size_t smem = size_t(cf.bn) * kL + size_t(cf.threads) * 4;

    cudaGraph_t g;
    cudaGraphExec_t ge;
    CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int l = 0; l < layers; ++l) {
      cudaLaunchConfig_t lc{};
      lc.gridDim = dim3(ctas);
      lc.blockDim = dim3(cf.threads);
      lc.dynamicSmemBytes = smem;
      lc.stream = stream;
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr.val.programmaticStreamSerializationAllowed = 1;
      lc.attrs = &attr;
      lc.numAttrs = cf.pdl ? 1 : 0;
      const Args a{w + w_bytes * l, o, out + size_t(heads) * cf.v * l, stamps + size_t(l) * ctas * kStamps,
                   cf.v, cf.bn, cf.trigger, cf.fetch};
      CHECK_CUDA(cudaLaunchKernelEx(&lc, link, a));
    }
    CHECK_CUDA(cudaStreamEndCapture(stream, &g));
    CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
    std::vector<double> per_layer;
    for (int rep = 0; rep < 28; ++rep) {
      CHECK_CUDA(cudaEventRecord(e0, stream));
      CHECK_CUDA(cudaGraphLaunch(ge, stream));
      CHECK_CUDA(cudaEventRecord(e1, stream));
      CHECK_CUDA(cudaEventSynchronize(e1));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      if (rep >= 3) per_layer.push_back(ms * 1e3 / layers);
    }
    std::vector<unsigned long long> st(size_t(layers) * ctas * kStamps);
    CHECK_CUDA(cudaMemcpy(st.data(), stamps, st.size() * 8, cudaMemcpyDeviceToHost));
    std::vector<double> S(layers), R(layers), D(layers), E(layers), O(layers);
    for (int l = 0; l < layers; ++l) {
      unsigned long long s = ~0ull, r = ~0ull, d = 0, e = 0;
      double o_sum = 0;
      for (int c = 0; c < ctas; ++c) {
        const unsigned long long* x = &st[(size_t(l) * ctas + c) * kStamps];
        s = std::min(s, x[0]), r = std::min(r, x[1]), d = std::max(d, x[2]), e = std::max(e, x[3]);
        o_sum += double(x[4] - x[1]);
      }
      S[l] = s * 1e-3, R[l] = r * 1e-3, D[l] = d * 1e-3, E[l] = e * 1e-3, O[l] = o_sum / ctas * 1e-3;
    }
    std::vector<double> period, launch, fetch, release, tail, early, o_time;
    for (int l = 4; l < layers - 4; ++l) {
      o_time.push_back(O[l]);
      period.push_back(E[l] - E[l - 1]);
      launch.push_back(S[l] - R[l - 1]);
      fetch.push_back(D[l] - S[l]);
      release.push_back(R[l] - E[l - 1]);
      tail.push_back(E[l] - std::max(R[l], D[l]));
      early.push_back(D[l] > S[l] ? std::clamp((E[l - 1] - S[l]) / (D[l] - S[l]), 0.0, 1.0) : 0.0);
    }
    const double bytes = double(w_bytes) + heads * kL * 2.0 + heads * cf.v * 2.0;
    const double floor_us = bytes / ceiling * 1e6, us = median(per_layer);
    std::printf("%3d  %3d %3d %4d %-10s %5s %3s  %8.2f %5.2f  %7.2f | %6.2f %6.2f %7.2f %5.2f %5.2f %5.2f  (%d "
                "layers, period %.2f)\n",
                cf.v, cf.bn, cf.threads, ctas, trigger_names[cf.trigger], cf.fetch ? "yes" : "no",
                cf.pdl ? "on" : "off", us, floor_us, us / floor_us, median(launch), median(fetch), median(release),
                median(tail), median(early), median(o_time), layers, median(period));
    CHECK_CUDA(cudaGraphExecDestroy(ge));
    CHECK_CUDA(cudaGraphDestroy(g));
    CHECK_CUDA(cudaFree(w));
    CHECK_CUDA(cudaFree(o));
    CHECK_CUDA(cudaFree(out));
    CHECK_CUDA(cudaFree(stamps));
  }
  return 0;
}

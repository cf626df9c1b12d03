// Where the period of a PDL chain goes when each layer's kernel must fetch its FP8 weights
// (the value up-projection's decode: H = 128, V = 128 or 256, L = 512, M = 1).  A stand-in
// kernel with the decode tile's shape and residency (256 threads, four CTAs an SM at BN = 64)
// — a CTA per (head, BN-column block) copies its BN x L weight bytes into shared memory
// (16-byte cp.async, swizzled so that its reads are free of bank conflicts) before the PDL
// wait, then reads o, forms one dot product per column and stores the row — stamps
// %globaltimer in every CTA at entry, past the wait, when its weights are there (and, but for
// the trigger on landing, the wait is over), after its dot products and at exit, and notes
// its SM (timeline.h reads the stamps).  Per layer: first
// entry S, first release R (past the wait), last "ready" D, last exit E.  Printed medians over
// the middle layers of the last replay: launch = S(l) - R(l-1) (how long after the previous
// layer's first release this one's first CTA runs); ready = D(l) - S(l); release = R(l) -
// E(l-1) (the chain's completion-to-release gap); unhidden = D(l) - R(l) (how long past its
// release the layer still waits for weights: the fetch not hidden; negative with the trigger
// on landing, whose weights land before the wait); tail = E(l) - max(R(l), D(l)); o/cta = a
// CTA's time from having both its release and its weights to the end of its dot products
// (its o loads' round trip and the products), averaged over the CTAs; CTA/SM
// = the most CTAs of the layer on one SM; period = E(l) - E(l-1).
// The trigger (griddepcontrol.launch_dependents) is placed: after the wait (spark's place),
// first, once the CTA's own weights have landed (waited for before the PDL wait), after its
// dot products, or nowhere (the CTA's exit); and the fetch can be left out.  Column w: the
// dot products in floats (f, issue-bound like a slow tile), as integer sums of the same
// shared-memory reads (i, nearly free: what the chain costs with a fast tile), or in floats
// over 1, 2 or 3 quarters of the span; sl: the most CTAs an SM, by padding shared memory (0: as
// many as registers and the weights allow).
// Build and run on the GPU machine (chain.cuh and timeline.h beside it):
//   nvcc -O3 -std=c++17 -arch=sm_90a pdl_timeline.cu -o pdl_timeline && ./pdl_timeline
#include <cstdint>

#include "chain.cuh"
#include "timeline.h"

constexpr int kL = 512, kStamps = kTimelineStamps, kThreads = 256;
enum Trigger { kAfterWait = 0, kFirst = 1, kLanded = 2, kAfterO = 3, kAtExit = 4 };

struct Args {
  const uint8_t* w;    // [H, V, L] FP8 bytes of this layer
  const uint16_t* o;   // [H, L] bf16 (M = 1)
  uint16_t* out;       // [H * V]
  unsigned long long* stamps;  // [CTAs, kStamps] of this layer
  int v, bn, trigger, fetch, work;  // work: quarters of the span in float products, the rest integer sums
};

__device__ __forceinline__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

__device__ __forceinline__ unsigned smid() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// Four CTAs an SM (64 registers a thread), as the real tile at 128 heads.
__global__ void __launch_bounds__(kThreads, 4) link(Args a) {
  extern __shared__ __align__(16) uint8_t smem[];
  float* partial = reinterpret_cast<float*>(smem + a.bn * kL);
  const unsigned long long t_entry = now();
  if (a.trigger == kFirst) launch_dependents();
  const int blocks_n = a.v / a.bn, h = blockIdx.x / blocks_n, n0 = blockIdx.x % blocks_n * a.bn;
  const uint8_t* src = a.w + (static_cast<size_t>(h) * a.v + n0) * kL;  // BN whole rows: contiguous
  // Row r's 16-byte piece q sits at slot q ^ (r & 7) of the row, so that the eight lanes
  // reading one piece of eight consecutive rows cover all banks.
  const int vecs = a.bn * kL / 16;
  if (a.fetch)
    for (int i = threadIdx.x; i < vecs; i += blockDim.x) {
      const int r = i / (kL / 16), q = i % (kL / 16);
      const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem + r * kL + 16 * (q ^ (r & 7))));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src + 16 * i) : "memory");
    }
  asm volatile("cp.async.commit_group;" ::: "memory");
  unsigned long long t_landed = 0, t_release = 0;
  if (a.trigger == kLanded) {
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();
    t_landed = now();
    launch_dependents();
    asm volatile("griddepcontrol.wait;" ::: "memory");
    t_release = now();
  } else {
    // The real tile's order: the wait, the trigger, then the weights (so "landed" is when
    // they are there and the wait is over).
    asm volatile("griddepcontrol.wait;" ::: "memory");
    t_release = now();
    if (a.trigger == kAfterWait) launch_dependents();
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();
    t_landed = now();
  }
  // One dot product per column: thread (segment s, column c) over its span of L, 16 weights a
  // step, with four 16-byte o loads requested together (as the real tile's four a lane) and
  // used in turn along the span.  o is never written, so it stays in L2.
  const int segments = blockDim.x / a.bn, span = kL / segments;
  const int c = threadIdx.x % a.bn, s = threadIdx.x / a.bn;
  const uint16_t* o = a.o + static_cast<size_t>(h) * kL + s * span;
  uint4 ov[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) ov[k] = *reinterpret_cast<const uint4*>(o + 8 * k);
  float sum = 0.0f;
  for (int k = 0; k < span / 16; k += 2)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int q = s * span / 16 + k + j;
      const uint4 wv = *reinterpret_cast<const uint4*>(smem + c * kL + 16 * (q ^ (c & 7)));
      const uint32_t ww[4] = {wv.x, wv.y, wv.z, wv.w};
      const uint32_t ow[8] = {ov[2 * j].x,     ov[2 * j].y,     ov[2 * j].z,     ov[2 * j].w,
                              ov[2 * j + 1].x, ov[2 * j + 1].y, ov[2 * j + 1].z, ov[2 * j + 1].w};
      if (k < a.work * (span / 16) / 4) {
#pragma unroll
        for (int e = 0; e < 16; ++e) {
          const float of = __uint_as_float((ow[e / 2] >> (16 * (e % 2))) << 16);
          sum += of * static_cast<float>(static_cast<int8_t>(ww[e / 4] >> (8 * (e % 4))));
        }
      } else {
        sum += __uint_as_float(((ww[0] + ww[1]) ^ (ww[2] + ww[3]) ^ ow[0] ^ ow[7]) & 0x3fffffffu);
      }
    }
  const unsigned long long t_o = now();
  if (a.trigger == kAfterO) launch_dependents();
  partial[s * a.bn + c] = sum;
  __syncthreads();
  if (threadIdx.x < a.bn) {
    float total = 0.0f;
    for (int k = 0; k < segments; ++k) total += partial[k * a.bn + threadIdx.x];
    a.out[static_cast<size_t>(h) * a.v + n0 + threadIdx.x] = static_cast<uint16_t>(__float_as_uint(total) >> 16);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long* st = a.stamps + static_cast<size_t>(blockIdx.x) * kStamps;
    st[0] = t_entry, st[1] = t_release, st[2] = t_landed, st[3] = now(), st[4] = t_o, st[5] = smid();
  }
}

struct Config {
  int v, bn, trigger, fetch, pdl, work, slots;  // slots: CTAs an SM forced by shared memory (0: as it comes)
};

int main() {
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaFuncSetAttribute(link, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024));
  const int heads = 128;

  const double ceiling = copy_ceiling_tbps(stream) * 1e12;  // bytes per second
  std::printf("%s, %d SMs, L2 %d MB; copy ceiling %.2f TB/s; H = %d, L = %d, M = 1, FP8 weights\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20, ceiling / 1e12, heads, kL);
  std::printf("64 layers or more a graph, median of 25 replays; after |: us (CTA/SM a count), medians over the "
              "middle layers of the last replay\n");
  std::printf("w sl   V   BN thr CTAs trigger    fetch PDL  us/layer floor x floor | launch  ready release unhidden  tail  "
              "o/cta CTA/SM  period\n");

  static const char* trigger_names[] = {"after-wait", "first", "landed", "after-o", "at-exit"};
  std::vector<Config> configs;
  for (int work : {4, 0})
    for (int slots : {0, 2})
      for (int bn : {64, 128})
        for (int trigger : {kAfterWait, kFirst, kLanded})
          for (int fetch : {1, 0}) configs.push_back({128, bn, trigger, fetch, 1, work, slots});
  for (int work : {4, 0})
    for (int slots : {0})
      for (int trigger : {kAfterWait, kFirst, kLanded})
        for (int fetch : {1, 0}) configs.push_back({256, 128, trigger, fetch, 1, work, slots});
  for (int work : {4, 0}) configs.push_back({128, 64, kAfterWait, 1, 0, work, 0});
  // How short the post-wait path must be for the trigger first to pay: float products on part of the span.
  for (int work : {1, 2, 3})
    for (int trigger : {kAfterWait, kFirst})
      for (int fetch : {1, 0}) configs.push_back({128, 64, trigger, fetch, 1, work, 0});

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
    size_t smem = size_t(cf.bn) * kL + size_t(kThreads) * 4;
    // A (slots + 1)-th of the SM's shared memory, with the 1 KB the SM reserves for each CTA on
    // top, leaves room for only `slots` of them.
    if (cf.slots)
      smem = std::max(smem, size_t(prop.sharedMemPerMultiprocessor) / (cf.slots + 1));

    const double us = per_layer_us(stream, layers, [&](int l) {
      const Args a{w + w_bytes * l, o, out + size_t(heads) * cf.v * l, stamps + size_t(l) * ctas * kStamps,
                   cf.v, cf.bn, cf.trigger, cf.fetch, cf.work};
      launch(cf.pdl != 0, ctas, kThreads, smem, stream, link, a);
    });
    std::vector<unsigned long long> st(size_t(layers) * ctas * kStamps);
    CHECK_CUDA(cudaMemcpy(st.data(), stamps, st.size() * 8, cudaMemcpyDeviceToHost));
    const TimelineRow t = read_timeline(st, layers, ctas, prop.multiProcessorCount);
    const double bytes = double(w_bytes) + heads * kL * 2.0 + heads * cf.v * 2.0;
    const double floor_us = bytes / ceiling * 1e6;
    const char work = cf.work == 4 ? 'f' : cf.work == 0 ? 'i' : char('0' + cf.work);
    std::printf("%c %2d %3d %4d %3d %4d %-10s %5s %3s %9.2f %5.2f %7.2f | ", work, cf.slots, cf.v, cf.bn, kThreads, ctas,
                trigger_names[cf.trigger], cf.fetch ? "yes" : "no", cf.pdl ? "on" : "off", us, floor_us, us / floor_us);
    std::printf("%6.2f %6.2f %7.2f %8.2f %5.2f %6.2f %6.0f %7.2f\n", t.launch, t.ready, t.release, t.unhidden, t.tail,
                t.o_cta, t.cta_per_sm, t.period);
    CHECK_CUDA(cudaFree(w));
    CHECK_CUDA(cudaFree(o));
    CHECK_CUDA(cudaFree(out));
    CHECK_CUDA(cudaFree(stamps));
  }
  return 0;
}

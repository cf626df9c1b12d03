// The timeline of spark's own value up-projection kernel in a PDL chain: what
// pdl_timeline.cu measures of a stand-in, read from the real tile.  A libspark built with
// bench/patches/oproj-stamps.patch has every tiled CTA write its %globaltimer stamps (entry,
// past the wait, weights landed, MMAs done, exit) and its SM into out's row 0 past the H x V
// columns; this harness gives each layer's out that padding, runs a CUDA graph of 64 or more
// layers (distinct weights, PDL on, through the C API), reads the last replay's stamps and
// prints timeline.h's columns per key: how long the post-wait path (o/cta: o and the MMAs once
// the CTA has both its release and its weights; tail: to the layer's last exit) is next to
// the fetch not hidden by the release.
// Only FP8 weights (the staged decode tile, whose "landed" stamp is thread 0's own copies
// arriving) and bf16 output.  Build on the GPU machine, with LIB the folder of the patched
// libspark.so (build-variant.sh with GPU_TESTS=test_gpu_mla_oproj puts it in its OUTDIR), then
// run ./oproj_timeline [HEADS [CSV]] (CSV: every CTA's stamps of five middle layers per key, in
// ns from the first of them, for reading one CTA at a time):
//   nvcc -O3 -std=c++17 -arch=sm_90a oproj_timeline.cu -I../../include -L$LIB -lspark -Xlinker -rpath,$LIB -o oproj_timeline
// The kernels compile at plan creation into SPARK_CACHE_DIR as usual.  Unpatched, the
// padding stays zero and the harness says so.
#include <cstdint>
#include <cstdlib>

#include <spark/spark.h>

#include "chain.cuh"
#include "timeline.h"

#define CHECK_SPARK(x)                                                                                 \
  do {                                                                                                 \
    spark_status s_ = (x);                                                                             \
    if (s_ != SPARK_SUCCESS) {                                                                         \
      std::fprintf(stderr, "%s:%d %s: %s (%s)\n", __FILE__, __LINE__, #x, spark_status_string(s_),     \
                   spark_last_error());                                                                \
      std::exit(1);                                                                                    \
    }                                                                                                  \
  } while (0)

constexpr int kL = 512;
constexpr size_t kPadBytes = 64 * 1024;  // stamps of up to 1365 CTAs

struct Case {
  int v, m;
  spark_weight_format weights;
  int pdl;
};

int main(int argc, char** argv) {
  const int heads = argc > 1 ? std::atoi(argv[1]) : 128;
  FILE* csv = argc > 2 ? std::fopen(argv[2], "w") : nullptr;
  if (argc > 2 && !csv) {
    std::fprintf(stderr, "oproj_timeline: cannot write CSV '%s'\n", argv[2]);
    return 2;
  }
  if (csv) std::fprintf(csv, "v,m,weights,pdl,layer,cta,entry,release,landed,mma,exit,sm\n");
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  spark_context ctx = nullptr;
  CHECK_SPARK(spark_context_create(nullptr, &ctx));
  const double ceiling = copy_ceiling_tbps(stream) * 1e12;
  std::printf("%s, %d SMs; copy ceiling %.2f TB/s; H = %d, L = %d; spark's kernel with stamps\n", prop.name,
              prop.multiProcessorCount, ceiling / 1e12, heads, kL);
  std::printf("  V    M weights   out  PDL CTAs  us/layer floor x floor | launch  ready release unhidden  tail  "
              "o/cta CTA/SM  period\n");

  static const char* weight_names[] = {"bf16", "mxfp8", "fp8-block"};
  std::vector<Case> cases;
  for (int v : {128, 256})
    for (int m : {1, 16})
      for (spark_weight_format w : {SPARK_WEIGHTS_MXFP8, SPARK_WEIGHTS_FP8_BLOCK128}) cases.push_back({v, m, w, 1});
  cases.push_back({128, 1, SPARK_WEIGHTS_FP8_BLOCK128, 0});

  for (const Case& cs : cases) {
    const size_t w_bytes = size_t(heads) * cs.v * kL;  // e4m3
    const int layers = std::max<int>(64, static_cast<int>((4 * size_t(prop.l2CacheSize) + w_bytes - 1) / w_bytes));
    const int64_t out_stride = int64_t(heads) * cs.v + int64_t(kPadBytes / 2);  // bf16 out
    const size_t out_bytes = size_t(cs.m) * out_stride * 2;

    spark_mla_oproj_desc desc = SPARK_MLA_OPROJ_DESC_INIT;
    desc.heads = heads, desc.latent_dim = kL, desc.v_head_dim = cs.v;
    desc.weight_format = cs.weights, desc.out_dtype = SPARK_DTYPE_BF16;
    spark_mla_qproj_plan_options opts = SPARK_MLA_QPROJ_PLAN_OPTIONS_INIT;
    opts.max_m = 16, opts.enable_pdl = cs.pdl;
    spark_mla_oproj_plan plan = nullptr;
    CHECK_SPARK(spark_mla_oproj_plan_create(ctx, &desc, &opts, &plan));

    // Values do not matter for timing: e4m3 bytes 0x38 (1.0), MXFP8 scale bytes 127 (1.0),
    // block scales 1.0, o about 0.75 in bf16.  Each layer has its own weights and scales.
    uint8_t *w = nullptr, *w_scale = nullptr, *out = nullptr;
    uint16_t* o = nullptr;
    CHECK_CUDA(cudaMalloc(&w, w_bytes * layers));
    CHECK_CUDA(cudaMemset(w, 0x38, w_bytes * layers));
    const size_t mx_bytes = size_t(heads) * cs.v * (kL / 32), blk_floats = size_t(heads) * cs.v / 128 * (kL / 128);
    const size_t scale_bytes = cs.weights == SPARK_WEIGHTS_MXFP8 ? mx_bytes : blk_floats * 4;
    CHECK_CUDA(cudaMalloc(&w_scale, scale_bytes * layers));
    if (cs.weights == SPARK_WEIGHTS_MXFP8) {
      CHECK_CUDA(cudaMemset(w_scale, 127, scale_bytes * layers));
    } else {
      const std::vector<float> ones(blk_floats * layers, 1.0f);
      CHECK_CUDA(cudaMemcpy(w_scale, ones.data(), scale_bytes * layers, cudaMemcpyHostToDevice));
    }
    CHECK_CUDA(cudaMalloc(&o, size_t(cs.m) * heads * kL * 2));
    CHECK_CUDA(cudaMemset(o, 0x3f, size_t(cs.m) * heads * kL * 2));
    CHECK_CUDA(cudaMalloc(&out, out_bytes * layers));
    CHECK_CUDA(cudaMemset(out, 0, out_bytes * layers));

    const double us = per_layer_us(stream, layers, [&](int l) {
      spark_mla_oproj_args a = SPARK_MLA_OPROJ_ARGS_INIT;
      a.m = cs.m;
      a.o = o, a.o_stride_m = int64_t(heads) * kL, a.o_stride_h = kL;
      a.w = w + w_bytes * l, a.w_stride_h = int64_t(cs.v) * kL, a.w_stride_v = kL;
      a.w_scale = w_scale + scale_bytes * l;
      if (cs.weights == SPARK_WEIGHTS_MXFP8) {
        a.w_scale_stride_h = int64_t(cs.v) * (kL / 32), a.w_scale_stride_v = kL / 32;
      } else {
        a.w_scale_stride_h = cs.v, a.w_scale_stride_v = kL / 128;
      }
      a.out = out + out_bytes * l, a.out_stride_m = out_stride;
      CHECK_SPARK(spark_mla_oproj_run(plan, &a, reinterpret_cast<spark_stream>(stream)));
    });

    // Each layer's stamps: row 0's padding, CTAs in blockIdx order; the count from layer 0.
    const size_t words = kPadBytes / 8;
    std::vector<unsigned long long> pad(size_t(layers) * words);
    for (int l = 0; l < layers; ++l)
      CHECK_CUDA(cudaMemcpy(&pad[size_t(l) * words], out + out_bytes * l + size_t(heads) * cs.v * 2, kPadBytes,
                            cudaMemcpyDeviceToHost));
    int ctas = 0;
    while ((ctas + 1) * kTimelineStamps <= static_cast<int>(words) && pad[size_t(ctas) * kTimelineStamps] != 0) ++ctas;
    const double bytes = double(w_bytes + scale_bytes) + double(cs.m) * heads * kL * 2 + double(cs.m) * heads * cs.v * 2;
    const double floor_us = bytes / ceiling * 1e6;
    std::printf("%3d %4d %-9s bf16 %4s %4d %9.2f %5.2f %7.2f", cs.v, cs.m, weight_names[cs.weights], cs.pdl ? "on" : "off",
                ctas, us, floor_us, us / floor_us);
    if (ctas == 0) {
      std::printf(" | no stamps (a libspark without oproj-stamps.patch, or a kernel without them)\n");
    } else {
      std::vector<unsigned long long> st(size_t(layers) * ctas * kTimelineStamps);
      for (int l = 0; l < layers; ++l)
        std::copy_n(&pad[size_t(l) * words], size_t(ctas) * kTimelineStamps, &st[size_t(l) * ctas * kTimelineStamps]);
      const TimelineRow t = read_timeline(st, layers, ctas, prop.multiProcessorCount);
      if (csv) {
        const int first = layers / 2 - 2;
        unsigned long long base = ~0ull;
        for (int c = 0; c < ctas; ++c) base = std::min(base, st[(size_t(first) * ctas + c) * kTimelineStamps]);
        for (int l = first; l < first + 5; ++l)
          for (int c = 0; c < ctas; ++c) {
            const unsigned long long* x = &st[(size_t(l) * ctas + c) * kTimelineStamps];
            std::fprintf(csv, "%d,%d,%s,%d,%d,%d,%lld,%lld,%lld,%lld,%lld,%llu\n", cs.v, cs.m, weight_names[cs.weights],
                         cs.pdl, l - first, c, (long long)(x[0] - base), (long long)(x[1] - base),
                         (long long)(x[2] - base), (long long)(x[4] - base), (long long)(x[3] - base), x[5]);
          }
      }
      std::printf(" | %6.2f %6.2f %7.2f %8.2f %5.2f %6.2f %6.0f %7.2f\n", t.launch, t.ready, t.release, t.unhidden,
                  t.tail, t.o_cta, t.cta_per_sm, t.period);
    }
    spark_mla_oproj_plan_destroy(plan);
    CHECK_CUDA(cudaFree(w));
    CHECK_CUDA(cudaFree(w_scale));
    CHECK_CUDA(cudaFree(o));
    CHECK_CUDA(cudaFree(out));
  }
  spark_context_destroy(ctx);
  if (csv && (std::ferror(csv) || std::fclose(csv) != 0)) {
    std::fprintf(stderr, "oproj_timeline: writing CSV '%s' failed\n", argv[2]);
    return 1;
  }
  return 0;
}

// Shared harness of the spark GPU suites.  See gpu_harness.h.
#include "tests/gpu/gpu_harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <regex>
#include <sstream>

namespace spark_gpu {

using namespace spark_test;

spark_context g_ctx = nullptr;
cublasHandle_t g_cublas = nullptr;
Summary g_summary;

// ---------------------------------------------------------------------------------------
// Plans.
// ---------------------------------------------------------------------------------------

const char* dtype_name(spark_dtype d) { return d == SPARK_DTYPE_E4M3 ? "e4m3" : "bf16"; }
const char* weights_name(spark_weight_format w) {
  return w == SPARK_WEIGHTS_MXFP8 ? "mxfp8" : w == SPARK_WEIGHTS_FP8_BLOCK128 ? "fp8-block" : "bf16";
}

spark_mla_qproj_desc make_desc(int H, int K, spark_dtype dtype, spark_weight_format weights) {
  spark_mla_qproj_desc d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.heads = H;
  d.nope_dim = K;
  d.latent_dim = kN;
  d.rope_dim = kR;
  d.weight_format = weights;
  d.out_dtype = dtype;
  return d;
}

Plan make_plan_w(int H, int K, spark_weight_format weights, spark_dtype dtype, int max_m, int lazy, int pdl) {
  const bool mx = weights == SPARK_WEIGHTS_MXFP8;
  const std::string weights_text = std::string(" weights=") + weights_name(weights);
  INFO("plan_create H=" << H << " K=" << K << weights_text << " dtype=" << cstr(dtype_name(dtype))
                        << " max_m=" << max_m << " lazy=" << lazy << " pdl=" << pdl);
  const spark_mla_qproj_desc desc = make_desc(H, K, dtype, weights);
  spark_mla_qproj_plan_options opts;
  std::memset(&opts, 0, sizeof opts);
  opts.struct_size = sizeof opts;
  opts.max_m = max_m;
  opts.lazy = lazy;
  opts.enable_pdl = pdl;
  spark_mla_qproj_plan p = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  if (mx) {
    const spark_status st = spark_mla_qproj_plan_create(g_ctx, &desc, &opts, &p);
    const std::string msg = spark_last_error();
    if (st == SPARK_ERROR_UNSUPPORTED) {
      spark_mla_qproj_plan_destroy(p);
      FAIL("MXFP8 weights are not implemented in this build: spark_mla_qproj_plan_create returned "
           "UNSUPPORTED (\""
           << msg << "\"). This MXFP8 case needs the MXFP8 kernel; it cannot pass until it lands.");
    }
    REQUIRE_MESSAGE(st == SPARK_SUCCESS, "spark_mla_qproj_plan_create (mxfp8) -> " << cstr(spark_status_string(st))
                                                                                  << " (" << static_cast<int>(st)
                                                                                  << "): " << msg);
  } else {
    SPARK_REQUIRE(spark_mla_qproj_plan_create(g_ctx, &desc, &opts, &p));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(p != nullptr);
  if (secs > 1.0) {
    std::printf("  (plan H=%d K=%d %s%s max_m=%d created in %.1f s)\n", H, K, mx ? "mxfp8 " : "",
                dtype_name(dtype), max_m, secs);
    std::fflush(stdout);
  }
  return Plan(p);
}

Plan make_plan(int H, int K, spark_dtype dtype, int max_m, int lazy, int pdl) {
  return make_plan_w(H, K, SPARK_WEIGHTS_BF16, dtype, max_m, lazy, pdl);
}

// ---------------------------------------------------------------------------------------
// Shapes and layouts.
// ---------------------------------------------------------------------------------------

std::string shape_str(const Shape& s) {
  std::ostringstream o;
  o << "H=" << s.H << " K=" << s.K << " M=" << s.M;
  if (s.pitch != kOutPitch) o << " pitch=" << s.pitch;
  return o.str();
}

spark_mla_qproj_args make_args(const Shape& s, const void* d_q, const void* d_w, void* d_out,
                               const float* d_q_scale) {
  spark_mla_qproj_args a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.m = s.M;
  a.q_nope = d_q;
  a.q_nope_stride_h = s.q_stride_h();
  a.q_nope_stride_m = s.q_stride_m();
  a.w = d_w;
  a.w_stride_h = Shape::w_stride_h();
  a.w_stride_k = Shape::w_stride_k();
  // bf16 weights: no scales.  The strides are set to what an MXFP8 pack would use, so a
  // validator that checks every stride > 0 regardless of format has nothing to object to.
  a.w_scale = nullptr;
  a.w_scale_stride_h = static_cast<int64_t>(s.K) * (kN / 32);
  a.w_scale_stride_k = kN / 32;
  a.q_pe = static_cast<const uint16_t*>(d_q) + s.K;
  a.q_pe_stride_m = s.q_stride_m();
  a.q_pe_stride_h = s.q_stride_h();
  a.out = d_out;
  a.out_stride_m = s.out_stride_m();
  a.out_stride_h = s.out_stride_h();
  a.q_scale = d_q_scale;
  return a;
}

void make_inputs(const Shape& s, uint64_t seed, HostInputs& in) {
  in.q.resize(s.q_elems());
  in.w.resize(s.w_elems());
  fill_bf16_random(in.q.data(), in.q.size(), seed, 1.0f);
  fill_bf16_random(in.w.data(), in.w.size(), mix64(seed ^ 0x57A7E5EEDull), kWeightScale);
}

void compute_reference(const Shape& s, const HostInputs& in, std::vector<double>& ref) {
  ref.resize(s.ref_elems());
  reference_mla_qproj(s.H, s.M, s.K, kN, in.q.data(), s.q_stride_h(), s.q_stride_m(), in.w.data(),
                      Shape::w_stride_h(), Shape::w_stride_k(), ref.data());
}

void upload(void* dst, const void* src, size_t bytes, cudaStream_t st) {
  CUDA_REQUIRE(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, st));
  CUDA_REQUIRE(cudaStreamSynchronize(st));
}

void upload_inputs(const Shape& s, const HostInputs& in, const DeviceBuffer& d_q, const DeviceBuffer& d_w,
                   cudaStream_t st) {
  REQUIRE(d_q.bytes() >= in.q.size() * 2);
  REQUIRE(d_w.bytes() >= in.w.size() * 2);
  (void)s;
  upload(d_q.get(), in.q.data(), in.q.size() * 2, st);
  upload(d_w.get(), in.w.data(), in.w.size() * 2, st);
}

void set_q_scale(const DeviceBuffer& d_scale, float v, cudaStream_t st) { upload(d_scale.get(), &v, sizeof v, st); }

void poison(const DeviceBuffer& b, cudaStream_t st) {
  CUDA_REQUIRE(cudaMemsetAsync(b.get(), kPoisonByte, b.bytes(), st));
}

void capture_run_pair(Graph& g, cudaStream_t st, spark_mla_qproj_plan p16, const spark_mla_qproj_args& a16,
                      spark_mla_qproj_plan p8, const spark_mla_qproj_args& a8, const DeviceBuffer& d_out16,
                      const DeviceBuffer& d_out8) {
  poison(d_out16, st);
  poison(d_out8, st);
  CUDA_REQUIRE(cudaStreamSynchronize(st));
  CUDA_REQUIRE(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  const spark_stream sst = reinterpret_cast<spark_stream>(st);
  const spark_status r16 = spark_mla_qproj_run(p16, &a16, sst);
  const std::string e16 = spark_last_error();
  const spark_status r8 = spark_mla_qproj_run(p8, &a8, sst);
  const std::string e8 = spark_last_error();
  const cudaError_t end = cudaStreamEndCapture(st, &g.graph);
  INFO("bf16 run while capturing: " << cstr(spark_status_string(r16)) << ": " << e16);
  INFO("e4m3 run while capturing: " << cstr(spark_status_string(r8)) << ": " << e8);
  REQUIRE(r16 == SPARK_SUCCESS);
  REQUIRE(r8 == SPARK_SUCCESS);
  REQUIRE_MESSAGE(end == cudaSuccess, "cudaStreamEndCapture -> " << cstr(cudaGetErrorName(end)));
  size_t nodes = 0;
  CUDA_REQUIRE(cudaGraphGetNodes(g.graph, nullptr, &nodes));
  CHECK_MESSAGE(nodes == 2, "each run should be exactly one kernel launch; graph has " << nodes << " nodes");
  CUDA_REQUIRE(cudaGraphInstantiate(&g.exec, g.graph, 0));
  std::vector<uint16_t> o16;
  download(o16, d_out16.get(), d_out16.bytes() / 2, st);
  CHECK(std::all_of(o16.begin(), o16.end(), [](uint16_t v) { return v == kPoisonBf16; }));
}

void replay_pair(const Graph& g, cudaStream_t st, const DeviceBuffer& d_out16, const DeviceBuffer& d_out8,
                 std::vector<uint16_t>& o16, std::vector<uint8_t>& o8) {
  poison(d_out16, st);
  poison(d_out8, st);
  CUDA_REQUIRE(cudaGraphLaunch(g.exec, st));
  CUDA_REQUIRE(cudaStreamSynchronize(st));
  download(o16, d_out16.get(), d_out16.bytes() / 2, st);
  download(o8, d_out8.get(), d_out8.bytes(), st);
}

void run_cublas_w(const Shape& s, const DeviceBuffer& d_q, const void* d_w, int64_t w_stride_h,
                  int64_t w_stride_k, const DeviceBuffer& d_c, cudaStream_t st, std::vector<uint16_t>& host_c) {
  REQUIRE(d_c.bytes() >= static_cast<size_t>(s.H) * s.M * kN * 2);
  CUBLAS_REQUIRE(cublasSetStream(g_cublas, st));
  // Written through the runtime first: under compute-sanitizer, only spark's kernels are
  // instrumented, so initcheck cannot see cuBLAS's stores and would report the download
  // below as a read of uninitialised memory.  The GEMM then overwrites every byte read back.
  CUDA_REQUIRE(cudaMemsetAsync(d_c.get(), 0, static_cast<size_t>(s.H) * s.M * kN * 2, st));
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_REQUIRE(cublasGemmStridedBatchedEx(
      g_cublas, CUBLAS_OP_N, CUBLAS_OP_N, kN, s.M, s.K, &alpha, d_w, CUDA_R_16BF, static_cast<int>(w_stride_k),
      static_cast<long long>(w_stride_h), d_q.get(), CUDA_R_16BF, static_cast<int>(s.q_stride_m()),
      static_cast<long long>(s.q_stride_h()), &beta, d_c.get(), CUDA_R_16BF, kN, static_cast<long long>(s.M) * kN,
      s.H, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  CUDA_REQUIRE(cudaStreamSynchronize(st));
  download(host_c, d_c.get(), static_cast<size_t>(s.H) * s.M * kN, st);
}

void run_cublas(const Shape& s, const DeviceBuffer& d_q, const DeviceBuffer& d_w, const DeviceBuffer& d_c,
                cudaStream_t st, std::vector<uint16_t>& host_c) {
  run_cublas_w(s, d_q, d_w.get(), Shape::w_stride_h(), Shape::w_stride_k(), d_c, st, host_c);
}

// ---------------------------------------------------------------------------------------
// Host-side checks.
// ---------------------------------------------------------------------------------------

template <typename T>
LayoutReport check_layout(const Shape& s, const std::vector<T>& out, T poison_value) {
  Findings unwritten, clobbered;
  const size_t head_rows = static_cast<size_t>(s.M + kSentinelRows) * s.H;
  REQUIRE(out.size() == head_rows * s.pitch);
  parallel_for(head_rows, [&](size_t b, size_t e, unsigned) {
    size_t nu = 0, nc = 0;
    for (size_t r = b; r < e; ++r) {
      const int m = static_cast<int>(r / s.H);
      const int h = static_cast<int>(r % s.H);
      const T* row = out.data() + r * s.pitch;
      for (int c = 0; c < s.pitch; ++c) {
        const bool must_write = m < s.M && c < kNR;
        const bool is_poison = row[c] == poison_value;
        if (must_write && is_poison) {
          if (nu++ < 3) {
            std::ostringstream o;
            o << "not written: out[m=" << m << ", h=" << h << ", c=" << c << "]";
            unwritten.add(o.str());
          }
        } else if (!must_write && !is_poison) {
          if (nc++ < 3) {
            std::ostringstream o;
            o << "written outside the view: out[m=" << m << ", h=" << h << ", c=" << c << "] = 0x"
              << std::hex << static_cast<unsigned>(row[c]) << (m >= s.M ? " (row >= M)" : " (pitch column)");
            clobbered.add(o.str());
          }
        }
      }
    }
    if (nu > 3) unwritten.add_count(nu - 3);
    if (nc > 3) clobbered.add_count(nc - 3);
  });
  LayoutReport r;
  r.unwritten = unwritten.count();
  r.clobbered = clobbered.count();
  r.examples = unwritten.str() + clobbered.str();
  return r;
}

template LayoutReport check_layout<uint16_t>(const Shape&, const std::vector<uint16_t>&, uint16_t);
template LayoutReport check_layout<uint8_t>(const Shape&, const std::vector<uint8_t>&, uint8_t);

AccuracyReport accuracy_from_sums(const std::vector<double>& spark2, const std::vector<double>& cublas2,
                                  const std::vector<double>& ref2) {
  double s2 = 0, c2 = 0, r2 = 0;
  for (size_t i = 0; i < spark2.size(); ++i) {
    s2 += spark2[i];
    c2 += cublas2[i];
    r2 += ref2[i];
  }
  AccuracyReport a;
  a.err_spark = std::sqrt(s2);
  a.err_cublas = std::sqrt(c2);
  a.ref_norm = std::sqrt(r2);
  a.rel_spark = a.ref_norm > 0 ? a.err_spark / a.ref_norm : a.err_spark;
  a.rel_cublas = a.ref_norm > 0 ? a.err_cublas / a.ref_norm : a.err_cublas;
  return a;
}

AccuracyReport check_bf16(const Shape& s, const std::vector<uint16_t>& out, const std::vector<uint16_t>& cub,
                          const std::vector<double>& ref, const std::vector<uint16_t>& q) {
  const size_t rows = static_cast<size_t>(s.M) * s.H;
  const unsigned slots = hardware_threads() + 1;
  std::vector<double> es(slots, 0.0), ec(slots, 0.0), rn(slots, 0.0);
  Findings nonfinite, rope;
  const bool with_cublas = !cub.empty();
  parallel_for(rows, [&](size_t b, size_t e, unsigned chunk) {
    double s2 = 0, c2 = 0, r2 = 0;
    size_t nn = 0, nr = 0;
    for (size_t mh = b; mh < e; ++mh) {
      const int m = static_cast<int>(mh / s.H);
      const int h = static_cast<int>(mh % s.H);
      const uint16_t* orow = out.data() + mh * s.pitch;  // m*H*pitch + h*pitch
      const double* rrow = ref.data() + mh * kN;
      const uint16_t* crow = with_cublas ? cub.data() + (static_cast<size_t>(h) * s.M + m) * kN : nullptr;
      for (int n = 0; n < kN; ++n) {
        const double r = rrow[n];
        const double v = bf16_to_float(orow[n]);
        if (!std::isfinite(v) && nn++ < 3) {
          std::ostringstream o;
          o << "non-finite out[m=" << m << ", h=" << h << ", n=" << n << "] = 0x" << std::hex << orow[n];
          nonfinite.add(o.str());
        }
        s2 += (v - r) * (v - r);
        r2 += r * r;
        if (with_cublas) {
          const double c = bf16_to_float(crow[n]);
          c2 += (c - r) * (c - r);
        }
      }
      const uint16_t* qpe = q.data() + mh * static_cast<size_t>(s.K + kR) + s.K;  // m*H*(K+R) + h*(K+R) + K
      for (int j = 0; j < kR; ++j) {
        if (orow[kN + j] != qpe[j] && nr++ < 3) {
          std::ostringstream o;
          o << "rope out[m=" << m << ", h=" << h << ", c=" << (kN + j) << "] = 0x" << std::hex << orow[kN + j]
            << ", q_pe = 0x" << qpe[j];
          rope.add(o.str());
        }
      }
    }
    es[chunk] += s2;
    ec[chunk] += c2;
    rn[chunk] += r2;
    if (nn > 3) nonfinite.add_count(nn - 3);
    if (nr > 3) rope.add_count(nr - 3);
  });
  AccuracyReport a = accuracy_from_sums(es, ec, rn);
  a.nonfinite = nonfinite.count();
  a.rope_mismatch = rope.count();
  a.examples = nonfinite.str() + rope.str();
  return a;
}

std::vector<uint8_t> e4m3_table(float scale) {
  std::vector<uint8_t> t(65536);
  for (uint32_t v = 0; v < 65536; ++v) t[v] = quantize_e4m3(static_cast<uint16_t>(v), scale);
  return t;
}

E4m3Report check_e4m3(const Shape& s, const std::vector<uint8_t>& out8, const std::vector<uint16_t>& out16,
                      const std::vector<uint16_t>& q, float scale, const std::vector<uint8_t>& table,
                      const std::vector<uint8_t>* other_table) {
  const size_t rows = static_cast<size_t>(s.M) * s.H;
  Findings mism;
  std::vector<size_t> diff(hardware_threads() + 1, 0);
  parallel_for(rows, [&](size_t b, size_t e, unsigned chunk) {
    size_t nm = 0, nd = 0;
    for (size_t mh = b; mh < e; ++mh) {
      const uint8_t* orow = out8.data() + mh * s.pitch;
      const uint16_t* brow = out16.data() + mh * s.pitch;
      const uint16_t* qpe = q.data() + mh * static_cast<size_t>(s.K + kR) + s.K;
      for (int c = 0; c < kNR; ++c) {
        const uint16_t src = c < kN ? brow[c] : qpe[c - kN];
        const uint8_t want = table[src];
        if (other_table != nullptr && (*other_table)[src] != want) ++nd;
        if (orow[c] != want && nm++ < 3) {
          std::ostringstream o;
          o << "e4m3 out[m=" << mh / s.H << ", h=" << mh % s.H << ", c=" << c << "] = 0x" << std::hex
            << static_cast<unsigned>(orow[c]) << ", want 0x" << static_cast<unsigned>(want) << " = quantize(bf16 0x"
            << src << " = " << std::dec << bf16_to_float(src) << ", q_scale " << scale << ")";
          mism.add(o.str());
        }
      }
    }
    if (nm > 3) mism.add_count(nm - 3);
    diff[chunk] += nd;
  });
  E4m3Report r;
  r.mismatch = mism.count();
  for (size_t d : diff) r.differs_from_other_scale += d;
  r.examples = mism.str();
  return r;
}

size_t count_differences(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return std::max(a.size(), b.size());
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}
size_t count_differences(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  if (a.size() != b.size()) return std::max(a.size(), b.size());
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

void require_accuracy(const AccuracyReport& a, bool with_cublas) {
  INFO("err spark " << a.err_spark << ", err cublas " << a.err_cublas << ", ||ref|| " << a.ref_norm
                    << ", rel spark " << a.rel_spark << ", rel cublas " << a.rel_cublas << a.examples);
  CHECK(a.nonfinite == 0);
  CHECK(a.rope_mismatch == 0);
  if (with_cublas) {
    // The baseline itself must be sane, or the comparison would prove nothing.
    CHECK(a.rel_cublas < 1e-2);
    CHECK(a.err_spark <= 1.05 * a.err_cublas + 1e-12);
  }
  CHECK(a.rel_spark < 1e-2);
}

void require_layout(const LayoutReport& l) {
  INFO(l.examples);
  CHECK(l.unwritten == 0);
  CHECK(l.clobbered == 0);
}

// ---------------------------------------------------------------------------------------
// Argument errors.
// ---------------------------------------------------------------------------------------

bool names_word(const std::string& msg, const std::string& word) {
  const std::regex re("(^|[^A-Za-z0-9_])" + word + "($|[^A-Za-z0-9_])");
  return std::regex_search(msg, re);
}

void expect_invalid(spark_mla_qproj_plan plan, const spark_mla_qproj_args& a, cudaStream_t st, const char* what,
                    const char* arg_name) {
  const spark_status r = spark_mla_qproj_run(plan, &a, reinterpret_cast<spark_stream>(st));
  const std::string msg = spark_last_error();
  INFO(cstr(what) << " -> " << cstr(spark_status_string(r)) << " (" << int(r) << "): \"" << msg << "\"");
  CHECK(r == SPARK_ERROR_INVALID_ARGUMENT);
  CHECK(!msg.empty());
  if (arg_name != nullptr) CHECK(names_word(msg, arg_name));
}

// ---------------------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------------------

int gpu_suite_main(const char* name, int argc, char** argv, const std::function<void(double)>& print_summary) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::printf("%s: SKIPPED: no CUDA device (%s)\n", name,
                e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount returned 0");
    return SPARK_SKIP_CODE;
  }
  cudaError_t ce = cudaSetDevice(0);
  if (ce != cudaSuccess) {
    std::printf("%s: cudaSetDevice(0) failed: %s\n", name, cudaGetErrorString(ce));
    return 1;
  }
  cudaDeviceProp prop;
  std::memset(&prop, 0, sizeof prop);
  ce = cudaGetDeviceProperties(&prop, 0);
  if (ce != cudaSuccess) {
    std::printf("%s: cudaGetDeviceProperties failed: %s\n", name, cudaGetErrorString(ce));
    return 1;
  }

  spark_context_options opts;
  std::memset(&opts, 0, sizeof opts);
  opts.struct_size = sizeof opts;
  opts.device = 0;
  const spark_status cs = spark_context_create(&opts, &g_ctx);
  if (cs != SPARK_SUCCESS || g_ctx == nullptr) {
    std::printf("%s: spark_context_create failed: %s: %s\n", name, spark_status_string(cs), spark_last_error());
    return 1;
  }
  int32_t cc = 0;
  if (spark_context_compute_capability(g_ctx, &cc) != SPARK_SUCCESS) cc = -1;
  const cublasStatus_t bs = cublasCreate(&g_cublas);
  if (bs != CUBLAS_STATUS_SUCCESS) {
    std::printf("%s: cublasCreate failed: %s\n", name, cublasGetStatusName(bs));
    spark_context_destroy(g_ctx);
    return 1;
  }
  std::printf("%s: %s (sm_%d per spark, %d.%d per CUDA), spark %s, seed %llu "
              "(SPARK_TEST_SEED=%llu reproduces the data), %u host threads\n",
              name, prop.name, cc, prop.major, prop.minor, spark_version_string(),
              static_cast<unsigned long long>(base_seed()), static_cast<unsigned long long>(base_seed()),
              hardware_threads());
  std::fflush(stdout);

  const auto t0 = std::chrono::steady_clock::now();
  doctest::Context dc;
  dc.applyCommandLine(argc, argv);
  const int res = dc.run();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (!dc.shouldExit()) print_summary(secs);
  cublasDestroy(g_cublas);
  spark_context_destroy(g_ctx);
  return res;
}

}  // namespace spark_gpu

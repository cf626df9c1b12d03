// Shared harness of the spark GPU suites (test_gpu_mla_qproj, test_gpu_mla_qproj_mxfp8):
// checking macros, RAII device buffers / streams / graphs / plans, the server-like
// layouts (token-major q, kv_b-like weight pack, pitched out with sentinel rows), the
// poison / sentinel checks, the cuBLAS baseline, the accuracy and e4m3 checks, and a
// main() that skips (exit SPARK_SKIP_CODE) where there is no CUDA device.
//
// The layouts, exactly as an inference server has them:
//   q    ONE token-major bf16 buffer [M, H, K+R]; q_nope = q (stride_h K+R, stride_m H*(K+R)),
//        q_pe = q + K (stride_m H*(K+R), stride_h K+R)
//   W    (bf16) the first K rows of each head of a [H, 448, 512] bf16 pack (stride_h 448*512,
//        stride_k 512)
//   out  pitched [M(+3 sentinel rows), H, 584 (or 592)] with 576 used columns; bf16 or e4m3
// and every output buffer is poisoned with 0xFF bytes (bf16 0xFFFF and e4m3 0xFF are NaN,
// which finite inputs can never produce) before every run.
//
// Every test file that includes this header defines DOCTEST_CONFIG_IMPLEMENT itself and
// calls gpu_suite_main() from its main().
#pragma once

#include <doctest/doctest.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "spark/spark.h"
#include "tests/support/reference.h"
#include "tools/common/cuda_holders.h"

#ifndef SPARK_SKIP_CODE
#define SPARK_SKIP_CODE 77
#endif

// The text of a comma-separated list macro, for test names that show the list a case runs.
#define SPARK_TEST_STR_(...) #__VA_ARGS__
#define SPARK_TEST_STR(...) SPARK_TEST_STR_(__VA_ARGS__)

namespace spark_gpu {

// ---------------------------------------------------------------------------------------
// Constants shared by the suites.
// ---------------------------------------------------------------------------------------

inline constexpr int kN = 512;              // latent_dim
inline constexpr int kR = 64;               // rope_dim
inline constexpr int kNR = kN + kR;         // 576 used output columns
inline constexpr int kOutPitch = 584;       // default out_stride_h (8 pitch columns never written)
inline constexpr int kOutPitch16 = 592;     // an out_stride_h that keeps e4m3 rows 16-byte aligned
inline constexpr int kPackRows = 448;       // rows per head of the kv_b-like bf16 weight pack
inline constexpr int kMaxM = 1000;          // max_m of the main plans
inline constexpr int kSentinelRows = 3;     // rows >= M allocated past the end of out
inline constexpr uint8_t kPoisonByte = 0xFF;
inline constexpr uint16_t kPoisonBf16 = 0xFFFF;  // a bf16 NaN
inline constexpr uint8_t kPoisonE4m3 = 0xFF;     // an e4m3 NaN
// Weights ~ N(0, 0.08^2): the projection comes out ~N(0, ~1), so the e4m3 scales below
// hit subnormals, the middle of the range and saturation alike.
inline constexpr float kWeightScale = 0.08f;
// Non-power-of-two q_scale values, cycled over the cases.
inline constexpr float kScales[] = {0.0371f, 0.00713f, 0.291f};
inline constexpr size_t kNumScales = sizeof kScales / sizeof kScales[0];

// ---------------------------------------------------------------------------------------
// Process-wide state (created by gpu_suite_main()).
// ---------------------------------------------------------------------------------------

extern spark_context g_ctx;
extern cublasHandle_t g_cublas;

struct Summary {
  size_t cases = 0;            // (H, K, M) accuracy cases checked (bf16 + e4m3 each)
  size_t extra_checks = 0;     // graph / lazy / PDL / error-path checks
  double max_rel_spark = 0.0;  // max over cases of ||spark - ref|| / ||ref||
  double max_rel_cublas = 0.0;
  double max_ratio = 0.0;      // max over cases of err_spark / err_cublas
};
extern Summary g_summary;

// doctest's message builders print a const char* as a pointer: stream std::strings.
inline std::string cstr(const char* p) { return p != nullptr ? std::string(p) : std::string("(null)"); }

// ---------------------------------------------------------------------------------------
// Checking macros: every CUDA / cuBLAS / spark call is checked, with names and messages.
// ---------------------------------------------------------------------------------------

#define CUDA_REQUIRE(expr)                                                   \
  do {                                                                       \
    const cudaError_t cuda_e_ = (expr);                                      \
    REQUIRE_MESSAGE(cuda_e_ == cudaSuccess,                                  \
                    #expr " -> " << ::spark_gpu::cstr(cudaGetErrorName(cuda_e_)) << ": "  \
                                 << ::spark_gpu::cstr(cudaGetErrorString(cuda_e_)));      \
  } while (0)

#define CUBLAS_REQUIRE(expr)                                                    \
  do {                                                                          \
    const cublasStatus_t cublas_s_ = (expr);                                    \
    REQUIRE_MESSAGE(cublas_s_ == CUBLAS_STATUS_SUCCESS,                         \
                    #expr " -> " << ::spark_gpu::cstr(cublasGetStatusName(cublas_s_)) << ": " \
                                 << ::spark_gpu::cstr(cublasGetStatusString(cublas_s_)));    \
  } while (0)

// On failure: the status, its name and spark_last_error() (read right after the call).
#define SPARK_REQUIRE(expr)                                                      \
  do {                                                                           \
    const spark_status spark_s_ = (expr);                                        \
    const std::string spark_msg_ = spark_last_error();                           \
    REQUIRE_MESSAGE(spark_s_ == SPARK_SUCCESS,                                   \
                    #expr " -> " << ::spark_gpu::cstr(spark_status_string(spark_s_)) << " ("  \
                                 << static_cast<int>(spark_s_) << "): " << spark_msg_); \
  } while (0)

// ---------------------------------------------------------------------------------------
// RAII holders (a failed REQUIRE throws; nothing may leak).
// ---------------------------------------------------------------------------------------

using spark_tools::DeviceBuffer;
using spark_tools::Graph;
using spark_tools::Stream;
using Plan = spark_tools::SparkPlan;

#define DEVICE_ALLOC(buf, nbytes) CUDA_REQUIRE((buf).alloc(nbytes))

const char* dtype_name(spark_dtype d);
const char* weights_name(spark_weight_format w);

spark_mla_qproj_desc make_desc(int H, int K, spark_dtype dtype,
                               spark_weight_format weights = SPARK_WEIGHTS_BF16);

// Creates a plan (REQUIREs success).  For MXFP8 weights an UNSUPPORTED status fails with
// a message saying that the MXFP8 kernel is not in this build.
Plan make_plan_w(int H, int K, spark_weight_format weights, spark_dtype dtype, int max_m, int lazy = 0,
                 int pdl = 0);
// bf16 weights.
Plan make_plan(int H, int K, spark_dtype dtype, int max_m, int lazy = 0, int pdl = 0);

// ---------------------------------------------------------------------------------------
// Shapes and layouts.
// ---------------------------------------------------------------------------------------

struct Shape {
  int H, K, M;
  int64_t q_stride_h() const { return K + kR; }
  int64_t q_stride_m() const { return static_cast<int64_t>(H) * (K + kR); }
  size_t q_elems() const { return static_cast<size_t>(M) * H * (K + kR); }
  static constexpr int64_t w_stride_h() { return static_cast<int64_t>(kPackRows) * kN; }
  static constexpr int64_t w_stride_k() { return kN; }
  size_t w_elems() const { return static_cast<size_t>(H) * kPackRows * kN; }
  int pitch = kOutPitch;  // out_stride_h: 584 keeps e4m3 rows 8-byte aligned only, 592 16-byte
  int64_t out_stride_h() const { return pitch; }
  int64_t out_stride_m() const { return static_cast<int64_t>(H) * pitch; }
  // Whole out allocation: M rows plus the sentinel rows.
  size_t out_elems() const { return static_cast<size_t>(M + kSentinelRows) * H * pitch; }
  size_t ref_elems() const { return static_cast<size_t>(M) * H * kN; }
};

// The out pitch a sweep case uses: every other M of the sweeps (1, 16, 33, 257, ...) writes
// rows that stay 16-byte aligned in e4m3 too, so each kernel is checked on both alignments
// the contract allows (and on two pitches' worth of never-written columns).
inline int sweep_pitch(int M) { return (M == 1 || M == 16 || M == 33 || M == 257) ? kOutPitch16 : kOutPitch; }

std::string shape_str(const Shape& s);

// bf16-weight arguments of the layouts above (q_pe = q + K).
spark_mla_qproj_args make_args(const Shape& s, const void* d_q, const void* d_w, void* d_out,
                               const float* d_q_scale);

// Host copies of one case's inputs.
struct HostInputs {
  std::vector<uint16_t> q;  // [M, H, K+R]
  std::vector<uint16_t> w;  // [H, 448, 512]
};

void make_inputs(const Shape& s, uint64_t seed, HostInputs& in);
void compute_reference(const Shape& s, const HostInputs& in, std::vector<double>& ref);

void upload(void* dst, const void* src, size_t bytes, cudaStream_t st);

template <typename T>
void download(std::vector<T>& dst, const void* src, size_t elems, cudaStream_t st) {
  dst.resize(elems);
  CUDA_REQUIRE(cudaMemcpyAsync(dst.data(), src, elems * sizeof(T), cudaMemcpyDeviceToHost, st));
  CUDA_REQUIRE(cudaStreamSynchronize(st));
}

void upload_inputs(const Shape& s, const HostInputs& in, const DeviceBuffer& d_q, const DeviceBuffer& d_w,
                   cudaStream_t st);
void set_q_scale(const DeviceBuffer& d_scale, float v, cudaStream_t st);
void poison(const DeviceBuffer& b, cudaStream_t st);

// One bf16-output and one e4m3-output run captured into one graph and instantiated, both
// outputs poisoned first.  Each run must be exactly one kernel node, and capturing must not
// have run anything (the bf16 output is still all poison afterwards).
void capture_run_pair(Graph& g, cudaStream_t st, spark_mla_qproj_plan p16, const spark_mla_qproj_args& a16,
                      spark_mla_qproj_plan p8, const spark_mla_qproj_args& a8, const DeviceBuffer& d_out16,
                      const DeviceBuffer& d_out8);
// Poison both outputs, replay g, wait, copy both whole allocations back.
void replay_pair(const Graph& g, cudaStream_t st, const DeviceBuffer& d_out16, const DeviceBuffer& d_out8,
                 std::vector<uint16_t>& o16, std::vector<uint8_t>& o8);

// Poison out, run, wait, copy out back (the whole allocation, sentinels included).
template <typename T>
void run_and_fetch(spark_mla_qproj_plan plan, const spark_mla_qproj_args& args, const DeviceBuffer& d_out,
                   cudaStream_t st, std::vector<T>& host_out) {
  poison(d_out, st);
  SPARK_REQUIRE(spark_mla_qproj_run(plan, &args, reinterpret_cast<spark_stream>(st)));
  CUDA_REQUIRE(cudaStreamSynchronize(st));
  download(host_out, d_out.get(), d_out.bytes() / sizeof(T), st);
}

// cuBLAS bf16 bmm on the same inputs: C(N x M) = W(N x K) * Q(K x M) per head, dense
// [H, M, N].  run_cublas reads W in the bf16 pack layout of Shape; run_cublas_w reads bf16
// weights at d_w with the given strides (e.g. dequantised MXFP8 weights).
void run_cublas_w(const Shape& s, const DeviceBuffer& d_q, const void* d_w, int64_t w_stride_h,
                  int64_t w_stride_k, const DeviceBuffer& d_c, cudaStream_t st, std::vector<uint16_t>& host_c);
void run_cublas(const Shape& s, const DeviceBuffer& d_q, const DeviceBuffer& d_w, const DeviceBuffer& d_c,
                cudaStream_t st, std::vector<uint16_t>& host_c);

// ---------------------------------------------------------------------------------------
// Host-side checks (multithreaded; assertions are made by the caller on the main thread).
// ---------------------------------------------------------------------------------------

// Collects a count and the first few examples from several threads.
class Findings {
 public:
  explicit Findings(size_t max_examples = 5) : max_examples_(max_examples) {}
  void add(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    ++count_;
    if (examples_.size() < max_examples_) examples_.push_back(what);
  }
  void add_count(size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    count_ += n;
  }
  size_t count() const { return count_; }
  std::string str() const {
    std::string s;
    for (const auto& e : examples_) s += "\n    " + e;
    if (count_ > examples_.size()) s += "\n    ...";
    return s;
  }

 private:
  size_t max_examples_;
  std::mutex mu_;
  size_t count_ = 0;
  std::vector<std::string> examples_;
};

struct LayoutReport {
  size_t unwritten = 0;  // elements of rows < M, columns < 576 still holding the poison
  size_t clobbered = 0;  // pitch columns / rows >= M no longer holding the poison
  std::string examples;
};

// out: the whole (M + 3)-row allocation, element type T (uint16_t bf16 or uint8_t e4m3).
template <typename T>
LayoutReport check_layout(const Shape& s, const std::vector<T>& out, T poison_value);
extern template LayoutReport check_layout<uint16_t>(const Shape&, const std::vector<uint16_t>&, uint16_t);
extern template LayoutReport check_layout<uint8_t>(const Shape&, const std::vector<uint8_t>&, uint8_t);

struct AccuracyReport {
  double err_spark = 0, err_cublas = 0, ref_norm = 0;
  double rel_spark = 0, rel_cublas = 0;
  size_t nonfinite = 0;      // non-finite spark bf16 values in columns < N
  size_t rope_mismatch = 0;  // columns N.. not bitwise q_pe
  std::string examples;
};

// The report's norms from per-thread sums of squares: spark's error, cuBLAS's error and the
// reference (entry i of each one thread's share), and the relative errors they give.
AccuracyReport accuracy_from_sums(const std::vector<double>& spark2, const std::vector<double>& cublas2,
                                  const std::vector<double>& ref2);

// out: the bf16 out allocation; cub: dense [H, M, N] cuBLAS result (may be empty: no
// cuBLAS comparison); ref: dense [M, H, N] doubles; q: host [M, H, K+R].
AccuracyReport check_bf16(const Shape& s, const std::vector<uint16_t>& out, const std::vector<uint16_t>& cub,
                          const std::vector<double>& ref, const std::vector<uint16_t>& q);

// quantize_e4m3(v, scale) for every bf16 bit pattern.
std::vector<uint8_t> e4m3_table(float scale);

struct E4m3Report {
  size_t mismatch = 0;
  size_t differs_from_other_scale = 0;  // elements where the other scale's table gives another code
  std::string examples;
};

// out8: the e4m3 out allocation; out16: the bf16 out allocation of the same inputs (the
// kernel's own bf16 result); q: host [M, H, K+R].  Rows < M, columns < 576 only.
E4m3Report check_e4m3(const Shape& s, const std::vector<uint8_t>& out8, const std::vector<uint16_t>& out16,
                      const std::vector<uint16_t>& q, float scale, const std::vector<uint8_t>& table,
                      const std::vector<uint8_t>* other_table);

size_t count_differences(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b);
size_t count_differences(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b);

// The accuracy contract, asserted.
void require_accuracy(const AccuracyReport& a, bool with_cublas);
void require_layout(const LayoutReport& l);

// ---------------------------------------------------------------------------------------
// Argument errors.
// ---------------------------------------------------------------------------------------

// True when msg contains word as a whole identifier ("w" does not match "w_stride_k").
bool names_word(const std::string& msg, const std::string& word);

// Runs with bad arguments: expects INVALID_ARGUMENT and (when arg_name is non-NULL) a
// message naming arg_name.
void expect_invalid(spark_mla_qproj_plan plan, const spark_mla_qproj_args& a, cudaStream_t st, const char* what,
                    const char* arg_name);

// ---------------------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------------------

// Skips (returns SPARK_SKIP_CODE, printing "<name>: SKIPPED: ...") without a device;
// otherwise creates g_ctx and g_cublas, prints the device and the seed, runs doctest, calls
// print_summary(seconds) unless doctest was asked only to list or show help, and cleans up.
int gpu_suite_main(const char* name, int argc, char** argv, const std::function<void(double)>& print_summary);

}  // namespace spark_gpu

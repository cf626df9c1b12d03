// GPU correctness suite of spark_mla_qproj_run with bf16 weights (spark.h's semantics and
// accuracy contract, its run rules: CUDA graphs, lazy plans while capturing, argument errors).
//
// Exits SPARK_SKIP_CODE (77) with a message where there is no CUDA device.
//
// The data is laid out exactly as an inference server has it:
//   q    ONE token-major bf16 buffer [M, H, K+R]; q_nope = q (stride_h K+R, stride_m H*(K+R)),
//        q_pe = q + K (stride_m H*(K+R), stride_h K+R)
//   W    the first K rows of each head of a [H, 448, 512] bf16 pack (stride_h 448*512, stride_k 512)
//   out  pitched [M(+3 sentinel rows), H, 584] with 576 used columns; bf16 or e4m3
// and every output buffer is poisoned with 0xFF bytes (bf16 0xFFFF and e4m3 0xFF are NaN,
// which finite inputs can never produce) before every run.  The harness (buffers, layouts,
// poison checks, cuBLAS baseline, main) is in gpu_harness.{h,cpp}.
//
// Run with SPARK_TEST_SEED=<seed> to reproduce the random data of a failing run.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "spark/spark.h"
#include "tests/gpu/gpu_harness.h"
#include "tests/support/reference.h"

using namespace spark_test;
using namespace spark_gpu;

namespace {

#define SPARK_MS_LIST 1, 2, 16, 17, 33, 64, 100, 200, 257, 1000
constexpr int kMs[] = {SPARK_MS_LIST};

// ---------------------------------------------------------------------------------------
// The main sweep: H x K x M, bf16 and e4m3 out.
// ---------------------------------------------------------------------------------------

void run_shape(int H, int K) {
  Plan p16 = make_plan(H, K, SPARK_DTYPE_BF16, kMaxM);
  Plan p8 = make_plan(H, K, SPARK_DTYPE_E4M3, kMaxM);
  Stream stream;
  CUDA_REQUIRE(stream.create());
  const cudaStream_t st = stream.get();

  const Shape big{H, K, kMaxM};
  DeviceBuffer d_q, d_w, d_c, d_scale;
  DEVICE_ALLOC(d_q, big.q_elems() * 2);
  DEVICE_ALLOC(d_w, big.w_elems() * 2);
  DEVICE_ALLOC(d_c, static_cast<size_t>(H) * kMaxM * kN * 2);
  DEVICE_ALLOC(d_scale, sizeof(float));

  HostInputs in;
  std::vector<double> ref;
  std::vector<uint16_t> out1, out2, cub;
  std::vector<uint8_t> out8;

  for (int M : kMs) {
    const Shape s{H, K, M, sweep_pitch(M)};
    const uint64_t seed = next_seed();
    const float scale = kScales[g_summary.cases % (sizeof kScales / sizeof kScales[0])];
    INFO(shape_str(s) << " seed=" << seed << " q_scale=" << scale);

    // Fresh inputs; per-case out buffers with exactly M + 3 rows.
    make_inputs(s, seed, in);
    upload_inputs(s, in, d_q, d_w, st);
    DeviceBuffer d_out, d_out8;
    DEVICE_ALLOC(d_out, s.out_elems() * 2);
    DEVICE_ALLOC(d_out8, s.out_elems());
    compute_reference(s, in, ref);

    // 1-3. bf16 output: accuracy against float64 and cuBLAS, RoPE bits, poison layout.
    AccuracyReport acc;
    {
      INFO("dtype=bf16");
      const spark_mla_qproj_args args = make_args(s, d_q.get(), d_w.get(), d_out.get(), nullptr);
      run_and_fetch(p16.get(), args, d_out, st, out1);
      run_cublas(s, d_q, d_w, d_c, st, cub);
      require_layout(check_layout<uint16_t>(s, out1, kPoisonBf16));
      acc = check_bf16(s, out1, cub, ref, in.q);
      require_accuracy(acc, true);

      // 4. Determinism: poison again, run again, bitwise identical (sentinels included).
      run_and_fetch(p16.get(), args, d_out, st, out2);
      const size_t ndiff = count_differences(out1, out2);
      INFO("determinism: " << ndiff << " elements differ between two runs");
      CHECK(ndiff == 0);
    }

    // 5. e4m3 output on the same inputs: bitwise quantize(own bf16 result or q_pe).
    {
      INFO("dtype=e4m3");
      set_q_scale(d_scale, scale, st);
      const spark_mla_qproj_args args = make_args(s, d_q.get(), d_w.get(), d_out8.get(), d_scale.as<float>());
      run_and_fetch(p8.get(), args, d_out8, st, out8);
      require_layout(check_layout<uint8_t>(s, out8, kPoisonE4m3));
      const E4m3Report r = check_e4m3(s, out8, out1, in.q, scale, e4m3_table(scale), nullptr);
      INFO(r.mismatch << " e4m3 elements differ from the rule" << r.examples);
      CHECK(r.mismatch == 0);
    }

    ++g_summary.cases;
    g_summary.max_rel_spark = std::max(g_summary.max_rel_spark, acc.rel_spark);
    g_summary.max_rel_cublas = std::max(g_summary.max_rel_cublas, acc.rel_cublas);
    if (acc.err_cublas > 0) g_summary.max_ratio = std::max(g_summary.max_ratio, acc.err_spark / acc.err_cublas);
    std::printf("  %-22s rel err spark %.3e cublas %.3e (ratio %.4f)\n", shape_str(s).c_str(), acc.rel_spark,
                acc.rel_cublas, acc.err_cublas > 0 ? acc.err_spark / acc.err_cublas : 0.0);
    std::fflush(stdout);
  }
}

}  // namespace

#define SPARK_SHAPE_CASE(H, K)                                                                                \
  TEST_CASE("mla_qproj bf16 weights: H=" #H " K=" #K ", M in {" SPARK_TEST_STR(SPARK_MS_LIST) "}, bf16 + e4m3 out") { \
    run_shape(H, K);                                                                                          \
  }

SPARK_SHAPE_CASE(1, 128)
SPARK_SHAPE_CASE(1, 192)
SPARK_SHAPE_CASE(8, 128)
SPARK_SHAPE_CASE(8, 192)
SPARK_SHAPE_CASE(11, 128)
SPARK_SHAPE_CASE(11, 192)
SPARK_SHAPE_CASE(16, 128)
SPARK_SHAPE_CASE(16, 192)
SPARK_SHAPE_CASE(32, 192)
SPARK_SHAPE_CASE(64, 128)
SPARK_SHAPE_CASE(64, 192)
SPARK_SHAPE_CASE(128, 128)
SPARK_SHAPE_CASE(128, 192)

// ---------------------------------------------------------------------------------------
// CUDA graph: capture once, replay with new input contents and a new q_scale value.
// ---------------------------------------------------------------------------------------

TEST_CASE("CUDA graph capture and replay follow new contents of q, W and q_scale") {
  const Shape s{16, 192, 33};
  Plan p16 = make_plan(s.H, s.K, SPARK_DTYPE_BF16, 64);
  Plan p8 = make_plan(s.H, s.K, SPARK_DTYPE_E4M3, 64);
  Stream stream;
  CUDA_REQUIRE(stream.create());
  const cudaStream_t st = stream.get();

  DeviceBuffer d_q, d_w, d_out, d_out8, d_scale;
  DEVICE_ALLOC(d_q, s.q_elems() * 2);
  DEVICE_ALLOC(d_w, s.w_elems() * 2);
  DEVICE_ALLOC(d_out, s.out_elems() * 2);
  DEVICE_ALLOC(d_out8, s.out_elems());
  DEVICE_ALLOC(d_scale, sizeof(float));
  const spark_mla_qproj_args a16 = make_args(s, d_q.get(), d_w.get(), d_out.get(), nullptr);
  const spark_mla_qproj_args a8 = make_args(s, d_q.get(), d_w.get(), d_out8.get(), d_scale.as<float>());

  const float scale1 = 0.0371f, scale2 = 0.00713f;
  const std::vector<uint8_t> table1 = e4m3_table(scale1), table2 = e4m3_table(scale2);

  HostInputs in;
  const uint64_t seed1 = next_seed();
  INFO(shape_str(s) << " seed1=" << seed1);
  make_inputs(s, seed1, in);
  upload_inputs(s, in, d_q, d_w, st);
  set_q_scale(d_scale, scale1, st);

  // Capture both runs into one graph.
  Graph g;
  capture_run_pair(g, st, p16.get(), a16, p8.get(), a8, d_out, d_out8);
  auto replay = [&](std::vector<uint16_t>& o16, std::vector<uint8_t>& o8) {
    replay_pair(g, st, d_out, d_out8, o16, o8);
  };
  auto eager = [&](std::vector<uint16_t>& o16, std::vector<uint8_t>& o8) {
    run_and_fetch(p16.get(), a16, d_out, st, o16);
    run_and_fetch(p8.get(), a8, d_out8, st, o8);
  };
  auto verify = [&](const char* what, const HostInputs& inputs, float scale, const std::vector<uint8_t>& table,
                    const std::vector<uint8_t>& other_table, const std::vector<uint16_t>& o16,
                    const std::vector<uint8_t>& o8) {
    INFO(cstr(what) << " (q_scale " << scale << ")");
    std::vector<double> ref;
    compute_reference(s, inputs, ref);
    require_layout(check_layout<uint16_t>(s, o16, kPoisonBf16));
    require_layout(check_layout<uint8_t>(s, o8, kPoisonE4m3));
    require_accuracy(check_bf16(s, o16, {}, ref, inputs.q), false);
    const E4m3Report r = check_e4m3(s, o8, o16, inputs.q, scale, table, &other_table);
    INFO(r.mismatch << " e4m3 elements differ from the rule" << r.examples);
    CHECK(r.mismatch == 0);
    // The two scales give different codes somewhere, so matching proves the scale used.
    CHECK(r.differs_from_other_scale > 0);
  };

  std::vector<uint16_t> g16a, e16a, g16b, e16b;
  std::vector<uint8_t> g8a, e8a, g8b, e8b;

  // First replay == eager run on the same contents.
  replay(g16a, g8a);
  eager(e16a, e8a);
  CHECK(count_differences(g16a, e16a) == 0);
  CHECK(count_differences(g8a, e8a) == 0);
  verify("replay 1", in, scale1, table1, table2, g16a, g8a);

  // New contents in the same device buffers, and a new q_scale value.
  const uint64_t seed2 = next_seed();
  INFO("seed2=" << seed2);
  HostInputs in2;
  make_inputs(s, seed2, in2);
  upload_inputs(s, in2, d_q, d_w, st);
  set_q_scale(d_scale, scale2, st);

  replay(g16b, g8b);
  eager(e16b, e8b);
  CHECK(count_differences(g16b, e16b) == 0);
  CHECK(count_differences(g8b, e8b) == 0);
  CHECK(count_differences(g16a, g16b) > 0);  // the replay saw the new contents
  verify("replay 2", in2, scale2, table2, table1, g16b, g8b);
  g_summary.extra_checks += 1;
}

// ---------------------------------------------------------------------------------------
// A lazy plan while capturing: a clear status, capture intact; then loads on first use.
// ---------------------------------------------------------------------------------------

TEST_CASE("lazy plan: run while capturing an unloaded kernel fails cleanly, then loads on first use") {
  // A shape used nowhere else in this suite, so the context cannot have it loaded.
  const Shape s{3, 128, 5};
  Plan plan = make_plan(s.H, s.K, SPARK_DTYPE_BF16, 64, /*lazy=*/1);
  Stream stream;
  CUDA_REQUIRE(stream.create());
  const cudaStream_t st = stream.get();

  DeviceBuffer d_q, d_w, d_out;
  DEVICE_ALLOC(d_q, s.q_elems() * 2);
  DEVICE_ALLOC(d_w, s.w_elems() * 2);
  DEVICE_ALLOC(d_out, s.out_elems() * 2);
  HostInputs in;
  const uint64_t seed = next_seed();
  INFO(shape_str(s) << " seed=" << seed);
  make_inputs(s, seed, in);
  upload_inputs(s, in, d_q, d_w, st);
  const spark_mla_qproj_args args = make_args(s, d_q.get(), d_w.get(), d_out.get(), nullptr);
  poison(d_out, st);
  CUDA_REQUIRE(cudaStreamSynchronize(st));

  // 1. Capturing: NOT_LOADED_WHILE_CAPTURING, a message, and the capture still valid.
  {
    Graph g;
    CUDA_REQUIRE(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    const spark_status r = spark_mla_qproj_run(plan.get(), &args, stream.spark());
    const std::string msg = spark_last_error();
    const cudaError_t end = cudaStreamEndCapture(st, &g.graph);
    INFO("run while capturing -> " << cstr(spark_status_string(r)) << " (" << int(r) << "): " << msg);
    CHECK(r == SPARK_ERROR_NOT_LOADED_WHILE_CAPTURING);
    CHECK(!msg.empty());
    REQUIRE_MESSAGE(end == cudaSuccess, "cudaStreamEndCapture -> " << cstr(cudaGetErrorName(end))
                                                                   << " (the failed run broke the capture)");
    size_t nodes = 0;
    CUDA_REQUIRE(cudaGraphGetNodes(g.graph, nullptr, &nodes));
    CHECK_MESSAGE(nodes == 0, "nothing may be launched by the failed run; graph has " << nodes << " nodes");
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusActive;
    CUDA_REQUIRE(cudaStreamIsCapturing(st, &cs));
    CHECK(cs == cudaStreamCaptureStatusNone);
    CUDA_REQUIRE(cudaStreamSynchronize(st));
    std::vector<uint16_t> o;
    download(o, d_out.get(), s.out_elems(), st);
    CHECK(std::all_of(o.begin(), o.end(), [](uint16_t v) { return v == kPoisonBf16; }));
  }

  // 2. A run on a non-capturing stream loads the kernel and is correct.
  std::vector<uint16_t> eager;
  run_and_fetch(plan.get(), args, d_out, st, eager);
  std::vector<double> ref;
  compute_reference(s, in, ref);
  require_layout(check_layout<uint16_t>(s, eager, kPoisonBf16));
  require_accuracy(check_bf16(s, eager, {}, ref, in.q), false);

  // 3. Capturing again now succeeds, and the replay gives the eager result.
  {
    Graph g;
    poison(d_out, st);
    CUDA_REQUIRE(cudaStreamSynchronize(st));
    CUDA_REQUIRE(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    const spark_status r = spark_mla_qproj_run(plan.get(), &args, stream.spark());
    const std::string msg = spark_last_error();
    const cudaError_t end = cudaStreamEndCapture(st, &g.graph);
    INFO("second capture: run -> " << cstr(spark_status_string(r)) << ": " << msg);
    REQUIRE(r == SPARK_SUCCESS);
    REQUIRE_MESSAGE(end == cudaSuccess, "cudaStreamEndCapture -> " << cstr(cudaGetErrorName(end)));
    CUDA_REQUIRE(cudaGraphInstantiate(&g.exec, g.graph, 0));
    CUDA_REQUIRE(cudaGraphLaunch(g.exec, st));
    CUDA_REQUIRE(cudaStreamSynchronize(st));
    std::vector<uint16_t> replayed;
    download(replayed, d_out.get(), s.out_elems(), st);
    CHECK(count_differences(replayed, eager) == 0);
  }
  g_summary.extra_checks += 1;
}

// ---------------------------------------------------------------------------------------
// Programmatic dependent launch: a PDL plan still waits for the kernel that wrote its input.
// ---------------------------------------------------------------------------------------

TEST_CASE("PDL plan: same bits as a plain plan, and sees the input written by the previous kernel") {
  const Shape s{16, 192, 64};
  Plan plain = make_plan(s.H, s.K, SPARK_DTYPE_BF16, 64);
  Plan pdl = make_plan(s.H, s.K, SPARK_DTYPE_BF16, 64, /*lazy=*/0, /*pdl=*/1);
  Stream stream;
  CUDA_REQUIRE(stream.create());
  const cudaStream_t st = stream.get();

  DeviceBuffer d_q, d_src[2], d_w, d_out;
  DEVICE_ALLOC(d_q, s.q_elems() * 2);
  DEVICE_ALLOC(d_src[0], s.q_elems() * 2);
  DEVICE_ALLOC(d_src[1], s.q_elems() * 2);
  DEVICE_ALLOC(d_w, s.w_elems() * 2);
  DEVICE_ALLOC(d_out, s.out_elems() * 2);
  HostInputs in[2];
  const uint64_t seed = next_seed();
  INFO(shape_str(s) << " seed=" << seed);
  make_inputs(s, seed, in[0]);
  make_inputs(s, mix64(seed), in[1]);
  upload(d_src[0].get(), in[0].q.data(), in[0].q.size() * 2, st);
  upload(d_src[1].get(), in[1].q.data(), in[1].q.size() * 2, st);
  upload(d_w.get(), in[0].w.data(), in[0].w.size() * 2, st);  // one W for both
  const spark_mla_qproj_args args = make_args(s, d_q.get(), d_w.get(), d_out.get(), nullptr);
  REQUIRE(s.q_elems() % 2 == 0);
  const int copy_floats = static_cast<int>(s.q_elems() / 2);
  CUBLAS_REQUIRE(cublasSetStream(g_cublas, st));

  // Expected outputs from the plain plan.
  std::vector<uint16_t> want[2];
  for (int i = 0; i < 2; ++i) {
    CUDA_REQUIRE(cudaMemcpyAsync(d_q.get(), d_src[i].get(), d_q.bytes(), cudaMemcpyDeviceToDevice, st));
    run_and_fetch(plain.get(), args, d_out, st, want[i]);
  }
  CHECK(count_differences(want[0], want[1]) > 0);

  // Each PDL run directly follows a kernel (cublasScopy, a bitwise copy) that writes q.
  std::vector<uint16_t> got;
  for (int iter = 0; iter < 6; ++iter) {
    const int i = iter % 2;
    INFO("iteration " << iter << " (q contents " << i << ")");
    poison(d_out, st);
    CUBLAS_REQUIRE(cublasScopy(g_cublas, copy_floats, d_src[i].as<float>(), 1, d_q.as<float>(), 1));
    SPARK_REQUIRE(spark_mla_qproj_run(pdl.get(), &args, stream.spark()));
    CUDA_REQUIRE(cudaStreamSynchronize(st));
    download(got, d_out.get(), s.out_elems(), st);
    CHECK(count_differences(got, want[i]) == 0);
  }
  g_summary.extra_checks += 1;
}

// ---------------------------------------------------------------------------------------
// Argument errors at run time: a status, a message naming the argument, nothing written.
// ---------------------------------------------------------------------------------------

TEST_CASE("run rejects bad arguments with a message naming the argument, and writes nothing") {
  const int max_m = 1000;
  const Shape s{16, 192, 16};
  Plan p16 = make_plan(s.H, s.K, SPARK_DTYPE_BF16, max_m);
  Plan p8 = make_plan(s.H, s.K, SPARK_DTYPE_E4M3, max_m);
  Stream stream;
  CUDA_REQUIRE(stream.create());
  const cudaStream_t st = stream.get();

  // q is big enough to hold an out view too (for the overlap case), so a wrongly accepted
  // call stays inside the allocation.
  const Shape s_max{s.H, s.K, max_m + 1};
  DeviceBuffer d_q, d_w, d_out, d_out8, d_scale;
  DEVICE_ALLOC(d_q, std::max(s_max.q_elems(), s.out_elems()) * 2);
  DEVICE_ALLOC(d_w, s.w_elems() * 2);
  DEVICE_ALLOC(d_out, s_max.out_elems() * 2);
  DEVICE_ALLOC(d_out8, s_max.out_elems());
  DEVICE_ALLOC(d_scale, sizeof(float));
  HostInputs in;
  make_inputs(s_max, next_seed(), in);
  upload_inputs(s_max, in, d_q, d_w, st);
  set_q_scale(d_scale, 0.0371f, st);
  poison(d_out, st);
  poison(d_out8, st);
  CUDA_REQUIRE(cudaStreamSynchronize(st));

  const spark_mla_qproj_args ok16 = make_args(s, d_q.get(), d_w.get(), d_out.get(), nullptr);
  const spark_mla_qproj_args ok8 = make_args(s, d_q.get(), d_w.get(), d_out8.get(), d_scale.as<float>());
  {
    spark_mla_qproj_args a = ok16;
    a.m = max_m + 1;
    expect_invalid(p16.get(), a, st, "bf16 m = max_m + 1", "m");
    a = ok8;
    a.m = max_m + 1;
    expect_invalid(p8.get(), a, st, "e4m3 m = max_m + 1", "m");
  }
  {
    spark_mla_qproj_args a = ok16;
    a.m = 0;
    expect_invalid(p16.get(), a, st, "m = 0", "m");
  }
  {
    spark_mla_qproj_args a = ok8;
    a.q_scale = nullptr;
    expect_invalid(p8.get(), a, st, "e4m3 without q_scale", "q_scale");
  }
  {
    spark_mla_qproj_args a = ok16;
    a.out_stride_m = a.out_stride_h;  // row (m + 1, h) is row (m, h + 1)
    expect_invalid(p16.get(), a, st, "out rows overlapping each other", "out_stride_m");
  }
  {
    spark_mla_qproj_args a = ok16;
    a.q_nope = d_q.as<uint16_t>() + 1;  // 2-byte aligned only
    expect_invalid(p16.get(), a, st, "misaligned q_nope", "q_nope");
  }
  {
    spark_mla_qproj_args a = ok16;
    a.q_nope = nullptr;
    expect_invalid(p16.get(), a, st, "null q_nope", "q_nope");
  }
  {
    spark_mla_qproj_args a = ok16;
    a.out = d_q.get();  // out overlaps q_nope / q_pe
    expect_invalid(p16.get(), a, st, "out overlapping q", nullptr);
  }

  // Nothing was launched.
  CUDA_REQUIRE(cudaStreamSynchronize(st));
  std::vector<uint16_t> o16, q_after;
  std::vector<uint8_t> o8;
  download(o16, d_out.get(), d_out.bytes() / 2, st);
  download(o8, d_out8.get(), d_out8.bytes(), st);
  download(q_after, d_q.get(), in.q.size(), st);
  CHECK(std::all_of(o16.begin(), o16.end(), [](uint16_t v) { return v == kPoisonBf16; }));
  CHECK(std::all_of(o8.begin(), o8.end(), [](uint8_t v) { return v == kPoisonE4m3; }));
  CHECK(count_differences(q_after, in.q) == 0);

  // And the plan still works afterwards (a valid run after the failures), with a q_scale
  // that bf16 output ignores.
  std::vector<uint16_t> out;
  const Shape s_ok = s;
  run_and_fetch(p16.get(), make_args(s_ok, d_q.get(), d_w.get(), d_out.get(), d_scale.as<float>()), d_out, st, out);
  HostInputs view;  // the first M rows of q are the case's inputs
  view.q.assign(in.q.begin(), in.q.begin() + static_cast<std::ptrdiff_t>(s_ok.q_elems()));
  view.w = in.w;
  std::vector<double> ref;
  compute_reference(s_ok, view, ref);
  // d_out holds max_m + 1 + 3 rows; the rows past M + 3 are more sentinels.
  std::vector<uint16_t> head(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(s_ok.out_elems()));
  require_layout(check_layout<uint16_t>(s_ok, head, kPoisonBf16));
  CHECK(std::all_of(out.begin() + static_cast<std::ptrdiff_t>(s_ok.out_elems()), out.end(),
                    [](uint16_t v) { return v == kPoisonBf16; }));
  require_accuracy(check_bf16(s_ok, head, {}, ref, view.q), false);
  g_summary.extra_checks += 1;
}

// ---------------------------------------------------------------------------------------
// main: skip without a device; one spark context for the whole run.
// ---------------------------------------------------------------------------------------

int main(int argc, char** argv) {
  return gpu_suite_main("test_gpu_mla_qproj", argc, argv, [](double secs) {
    std::printf("gpu suite: %zu cases checked (+%zu graph/lazy/PDL/error-path cases), max rel err spark %.3e vs "
                "cublas %.3e (max err ratio spark/cublas %.4f), %.1f s\n",
                g_summary.cases, g_summary.extra_checks, g_summary.max_rel_spark, g_summary.max_rel_cublas,
                g_summary.max_ratio, secs);
  });
}

// The benchmark loop: for each shape (H and K, or H and V) of the grid, each weight format, each
// M, each output row pitch and each output dtype, one row timed as timing.h describes (spark's
// plan for (shape, format, out) is created once with max_m = the largest M and reused across M;
// the L layers' weights are made once per (shape, format) and reused across M and out).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "spark/spark.h"
#include "tools/spark-bench/report.h"
#include "tools/spark-bench/staged.h"
#include "tools/spark-bench/workload.h"

namespace spark_bench {

struct BenchOptions {
  Op op = Op::kQproj;
  std::vector<int> heads, dims, ms;  // dims: K (qproj) or V (oproj)
  std::vector<WeightFormat> weights;
  std::vector<OutDtype> outs;
  std::vector<int> out_pitches = {kOutCols};  // qproj: out's row pitches (out_pitch_problem() == "" for each)
  std::vector<int> out_pads = {0};            // oproj: elements past H*V in out's rows (out_pad_problem())
  int layers = 64;
  int replays = 30;
  int warmup = 2;
  bool pdl = false;
  StagedQuant quant = StagedQuant::kFused;
  StagedBmm staged_bmm = StagedBmm::kCopy;  // oproj only
  size_t mem_budget_bytes = size_t{32} << 30;
};

// What every row shares.
struct BenchEnv {
  spark_context ctx = nullptr;
  cublasHandle_t cublas = nullptr;  // bound to stream, with a workspace
  cudaStream_t stream = nullptr;
  unsigned long long* counters = nullptr;  // kCompareCounters device u64 for the output comparisons
  size_t l2_bytes = 0;
  size_t budget_bytes = 0;  // for activations + weights (the workspace is already taken out)
  double ceiling_tbps = 0.0;
  std::string arch;  // spark's target for the device, e.g. "sm_90a" (rows name their kernel for it)
};

// How many rows the options describe.
size_t row_count(const BenchOptions& o);

// out's row pitches for one shape: --out-pitch (qproj), H*V + each --out-pad (oproj).
std::vector<int> row_pitches(const BenchOptions& o, const Shape& s);

// Runs every row of one shape, appending them to rows and printing them as they finish.
// A row that spark rejects (unsupported, a failed plan or run) is recorded and skipped; a
// CUDA or cuBLAS failure throws BenchError (the context may be unusable after it).
void run_shape(const BenchOptions& o, const BenchEnv& env, const Shape& shape, const Table& table,
               std::vector<Row>& rows);

// What run_shape would allocate, without a device (for --dry-run), and whether spark accepts
// the descriptor and the arguments of each (shape, format, out, pitch) (checked on the host by
// spark_mla_qproj_can_implement or spark_mla_oproj_can_implement, at the largest M), and the
// kernels its rows run on `arch` (kernel_info.h).
void describe_plan(const BenchOptions& o, size_t l2_bytes, size_t budget_bytes, const std::string& arch,
                   const Table& table);

}  // namespace spark_bench

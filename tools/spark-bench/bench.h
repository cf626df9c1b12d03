// The benchmark loop: for each (H, K) of the grid, each weight format, each M, each output row
// pitch and each output dtype, one row timed as timing.h describes (spark's plan for (H, K, format, out) is created
// once with max_m = the largest M and reused across M; the L layers' weights are made once per
// (H, K, format) and reused across M and out).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <vector>

#include "spark/spark.h"
#include "tools/spark-bench/report.h"
#include "tools/spark-bench/staged.h"
#include "tools/spark-bench/workload.h"

namespace spark_bench {

struct BenchOptions {
  std::vector<int> heads, nopes, ms;
  std::vector<WeightFormat> weights;
  std::vector<OutDtype> outs;
  std::vector<int> out_pitches = {kOutCols};  // out's row pitches (out_pitch_problem() == "" for each)
  int layers = 64;
  int replays = 30;
  int warmup = 2;
  bool pdl = false;
  StagedQuant quant = StagedQuant::kFused;
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
};

// How many rows the options describe.
size_t row_count(const BenchOptions& o);

// Runs every row of one (H, K), appending them to rows and printing them as they finish.
// A row that spark rejects (unsupported, a failed plan or run) is recorded and skipped; a
// CUDA or cuBLAS failure throws BenchError (the context may be unusable after it).
void run_shape(const BenchOptions& o, const BenchEnv& env, int heads, int nope, const Table& table,
               std::vector<Row>& rows);

// What run_shape would allocate, without a device (for --dry-run), and whether spark accepts
// the descriptor and the arguments of each (H, K, format, out, pitch) (checked on the host by
// spark_mla_qproj_can_implement, at the largest M).
void describe_plan(const BenchOptions& o, size_t l2_bytes, size_t budget_bytes, const Table& table);

}  // namespace spark_bench

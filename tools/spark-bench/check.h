// Status checks for spark-bench: every CUDA, cuBLAS and spark call goes through one of these.
// A failed check throws BenchError with the call, the status name and (for spark) spark_last_error().
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "spark/spark.h"

namespace spark_bench {

class BenchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A spark call failed; keeps the status so callers can tell UNSUPPORTED from a real failure.
class SparkError : public BenchError {
 public:
  SparkError(spark_status status, const std::string& what) : BenchError(what), status_(status) {}
  spark_status status() const { return status_; }

 private:
  spark_status status_;
};

inline void check_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  if (e == cudaSuccess) return;
  throw BenchError(std::string(expr) + " -> " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + " (" + file +
                   ":" + std::to_string(line) + ")");
}

inline void check_cublas(cublasStatus_t s, const char* expr, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw BenchError(std::string(expr) + " -> " + cublasGetStatusName(s) + ": " + cublasGetStatusString(s) + " (" +
                   file + ":" + std::to_string(line) + ")");
}

inline void check_spark(spark_status s, const char* expr) {
  if (s == SPARK_SUCCESS) return;
  const std::string msg = spark_last_error();  // read right after the call: it is per thread
  throw SparkError(s, std::string(expr) + " -> " + spark_status_string(s) + ": " + msg);
}

}  // namespace spark_bench

#define BENCH_CUDA(expr) ::spark_bench::check_cuda((expr), #expr, __FILE__, __LINE__)
#define BENCH_CUBLAS(expr) ::spark_bench::check_cublas((expr), #expr, __FILE__, __LINE__)
#define BENCH_SPARK(expr) ::spark_bench::check_spark((expr), #expr)

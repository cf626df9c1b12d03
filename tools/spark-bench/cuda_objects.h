// RAII holders for the CUDA, cuBLAS and spark objects spark-bench creates.  Destructors never
// throw; a failed benchmark unwinds without leaking device memory or leaving a capture open.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

#include "spark/spark.h"
#include "tools/common/cuda_holders.h"
#include "tools/spark-bench/check.h"

namespace spark_bench {

// The shared holders (tools/common/cuda_holders.h), creating in the constructor and
// throwing on failure.
class DeviceBuffer : public spark_tools::DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { alloc(bytes); }
  void alloc(size_t bytes) { BENCH_CUDA(spark_tools::DeviceBuffer::alloc(bytes)); }
};

class Stream : public spark_tools::Stream {
 public:
  Stream() { BENCH_CUDA(create()); }
};

using GraphExec = spark_tools::Graph;
using spark_tools::SparkContext;
using spark_tools::SparkPlan;  // the query projection's

struct OprojPlanDeleter {
  void operator()(spark_mla_oproj_plan p) const { spark_mla_oproj_plan_destroy(p); }
};
using OprojPlan = std::unique_ptr<std::remove_pointer_t<spark_mla_oproj_plan>, OprojPlanDeleter>;

class Event {
 public:
  Event() { BENCH_CUDA(cudaEventCreate(&e_)); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  ~Event() {
    if (e_ != nullptr) (void)cudaEventDestroy(e_);
  }
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

class CublasHandle {
 public:
  CublasHandle() { BENCH_CUBLAS(cublasCreate(&h_)); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle() { (void)cublasDestroy(h_); }
  cublasHandle_t get() const { return h_; }

 private:
  cublasHandle_t h_ = nullptr;
};

}  // namespace spark_bench

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
#include "tools/spark-bench/check.h"

namespace spark_bench {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { alloc(bytes); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { reset(); }

  void alloc(size_t bytes) {
    reset();
    BENCH_CUDA(cudaMalloc(&p_, bytes));
    bytes_ = bytes;
  }
  void reset() {
    if (p_ != nullptr) (void)cudaFree(p_);
    p_ = nullptr;
    bytes_ = 0;
  }
  void* get() const { return p_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// A non-blocking stream; ends a capture left open by an exception.
class Stream {
 public:
  Stream() { BENCH_CUDA(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s_, &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone) {
      cudaGraph_t g = nullptr;
      (void)cudaStreamEndCapture(s_, &g);
      if (g != nullptr) (void)cudaGraphDestroy(g);
    }
    (void)cudaStreamSynchronize(s_);
    (void)cudaStreamDestroy(s_);
  }
  cudaStream_t get() const { return s_; }
  spark_stream spark() const { return reinterpret_cast<spark_stream>(s_); }

 private:
  cudaStream_t s_ = nullptr;
};

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

// An instantiated CUDA graph.
class GraphExec {
 public:
  GraphExec() = default;
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  GraphExec(GraphExec&& o) noexcept
      : graph_(std::exchange(o.graph_, nullptr)), exec_(std::exchange(o.exec_, nullptr)) {}
  ~GraphExec() { reset(); }
  void reset() {
    if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) (void)cudaGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
  }
  cudaGraph_t* graph_slot() { return &graph_; }
  cudaGraph_t graph() const { return graph_; }
  cudaGraphExec_t* exec_slot() { return &exec_; }
  cudaGraphExec_t exec() const { return exec_; }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
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

struct SparkContextDeleter {
  void operator()(spark_context c) const { spark_context_destroy(c); }
};
using SparkContext = std::unique_ptr<std::remove_pointer_t<spark_context>, SparkContextDeleter>;

struct SparkPlanDeleter {
  void operator()(spark_mla_qproj_plan p) const { spark_mla_qproj_plan_destroy(p); }
};
using SparkPlan = std::unique_ptr<std::remove_pointer_t<spark_mla_qproj_plan>, SparkPlanDeleter>;

}  // namespace spark_bench

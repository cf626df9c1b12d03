// RAII holders for the CUDA runtime and spark objects that the GPU tests and spark-bench
// create.  They never throw: creation returns the CUDA status for the caller's own error
// policy (a doctest REQUIRE, a benchmark exception), and destructors release quietly, so a
// failure unwinds without leaking device memory or leaving a stream capture open.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

#include "spark/spark.h"

namespace spark_tools {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
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

  cudaError_t alloc(size_t bytes) {
    reset();
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaSuccess) {
      p_ = p;
      bytes_ = bytes;
    }
    return e;
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

// A non-blocking stream; the destructor ends a capture left open by a failure.
class Stream {
 public:
  Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (s_ == nullptr) return;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s_, &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone) {
      cudaGraph_t g = nullptr;
      (void)cudaStreamEndCapture(s_, &g);
      if (g != nullptr) (void)cudaGraphDestroy(g);
    }
    (void)cudaStreamSynchronize(s_);
    (void)cudaStreamDestroy(s_);
  }
  cudaError_t create() { return cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking); }
  cudaStream_t get() const { return s_; }
  spark_stream spark() const { return reinterpret_cast<spark_stream>(s_); }

 private:
  cudaStream_t s_ = nullptr;
};

// A captured graph and its instantiation.
struct Graph {
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&& o) noexcept : graph(std::exchange(o.graph, nullptr)), exec(std::exchange(o.exec, nullptr)) {}
  ~Graph() { reset(); }
  void reset() {
    if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    exec = nullptr;
    graph = nullptr;
  }
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
};

struct SparkContextDeleter {
  void operator()(spark_context c) const { spark_context_destroy(c); }
};
using SparkContext = std::unique_ptr<std::remove_pointer_t<spark_context>, SparkContextDeleter>;

struct SparkPlanDeleter {
  void operator()(spark_mla_qproj_plan p) const { spark_mla_qproj_plan_destroy(p); }
};
using SparkPlan = std::unique_ptr<std::remove_pointer_t<spark_mla_qproj_plan>, SparkPlanDeleter>;

}  // namespace spark_tools

#include "tools/spark-bench/timing.h"

#include <algorithm>
#include <cstdint>

#include "tools/spark-bench/device_ops.h"

namespace spark_bench {

namespace {

// GPU time the spin kernel holds the stream while the host enqueues a batch.  Retried longer
// when the host was not done in time.
constexpr uint64_t kSpinNs = 3'000'000;
constexpr int kSpinRetries = 1;
constexpr int kSpinGrowth = 10;

double elapsed_ms(const Event& start, const Event& stop) {
  float ms = 0.0f;
  BENCH_CUDA(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return static_cast<double>(ms);
}

}  // namespace

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double Samples::median() const { return median_of(us); }
double Samples::min() const { return us.empty() ? 0.0 : *std::min_element(us.begin(), us.end()); }
double Samples::max() const { return us.empty() ? 0.0 : *std::max_element(us.begin(), us.end()); }

GraphExec capture_graph(cudaStream_t stream, const std::function<void()>& body) {
  GraphExec g;
  BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  try {
    body();
  } catch (...) {
    cudaGraph_t partial = nullptr;
    (void)cudaStreamEndCapture(stream, &partial);
    if (partial != nullptr) (void)cudaGraphDestroy(partial);
    throw;
  }
  BENCH_CUDA(cudaStreamEndCapture(stream, &g.graph));
  BENCH_CUDA(cudaGraphInstantiate(&g.exec, g.graph, 0));
  // The first launch of a graph would otherwise pay for uploading it.
  BENCH_CUDA(cudaGraphUpload(g.exec, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  return g;
}

AlternatedTimes time_alternated(cudaGraphExec_t a, cudaGraphExec_t b, int layers, int warmup, int replays,
                                cudaStream_t stream) {
  for (int i = 0; i < warmup; ++i) {
    BENCH_CUDA(cudaGraphLaunch(a, stream));
    BENCH_CUDA(cudaGraphLaunch(b, stream));
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));

  // start/stop events per replay per arm: index 2 * r + arm.
  std::vector<Event> start(static_cast<size_t>(2 * replays)), stop(static_cast<size_t>(2 * replays));
  AlternatedTimes t;
  uint64_t spin_ns = kSpinNs;
  for (int attempt = 0;; ++attempt) {
    spin(spin_ns, stream);
    bool starved = false;
    for (int r = 0; r < replays; ++r) {
      // ABBA: even replays run a then b, odd ones b then a.
      for (int k = 0; k < 2; ++k) {
        const int arm = (r % 2 == 0) ? k : 1 - k;
        const size_t i = static_cast<size_t>(2 * r + arm);
        BENCH_CUDA(cudaEventRecord(start[i].get(), stream));
        BENCH_CUDA(cudaGraphLaunch(arm == 0 ? a : b, stream));
        BENCH_CUDA(cudaEventRecord(stop[i].get(), stream));
        // A replay whose start event the GPU has not reached once its graph and stop event
        // are queued cannot include waiting for the host.  One it has reached might (the
        // check is conservative).  A batch longer than the launch queue blocks the host in
        // cudaGraphLaunch with earlier replays still queued ahead, and stays clean.
        const cudaError_t q = cudaEventQuery(start[i].get());
        if (q != cudaSuccess && q != cudaErrorNotReady) BENCH_CUDA(q);
        starved = starved || q == cudaSuccess;
      }
    }
    BENCH_CUDA(cudaStreamSynchronize(stream));
    if (!starved || attempt == kSpinRetries) {
      t.host_starved = starved;
      t.spin_retries = attempt;
      break;
    }
    spin_ns *= kSpinGrowth;
  }

  t.a.us.reserve(static_cast<size_t>(replays));
  t.b.us.reserve(static_cast<size_t>(replays));
  for (int r = 0; r < replays; ++r) {
    t.a.us.push_back(elapsed_ms(start[2 * r], stop[2 * r]) * 1000.0 / layers);
    t.b.us.push_back(elapsed_ms(start[2 * r + 1], stop[2 * r + 1]) * 1000.0 / layers);
  }
  return t;
}

CopyCeiling measure_copy_ceiling(cudaStream_t stream, size_t copy_bytes, int reps) {
  DeviceBuffer src, dst;
  for (;;) {
    void* p = nullptr;
    void* q = nullptr;
    if (cudaMalloc(&p, copy_bytes) == cudaSuccess) {
      if (cudaMalloc(&q, copy_bytes) == cudaSuccess) {
        (void)cudaFree(p);
        (void)cudaFree(q);
        break;
      }
      (void)cudaFree(p);
    }
    (void)cudaGetLastError();  // clear the allocation failure
    copy_bytes /= 2;
    if (copy_bytes < (size_t{64} << 20)) throw BenchError("copy ceiling: cannot allocate two 64 MiB buffers");
  }
  src.alloc(copy_bytes);
  dst.alloc(copy_bytes);
  BENCH_CUDA(cudaMemsetAsync(src.get(), 0x3C, copy_bytes, stream));
  BENCH_CUDA(cudaMemsetAsync(dst.get(), 0, copy_bytes, stream));
  for (int i = 0; i < 2; ++i) {
    BENCH_CUDA(cudaMemcpyAsync(dst.get(), src.get(), copy_bytes, cudaMemcpyDeviceToDevice, stream));
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));

  std::vector<Event> start(static_cast<size_t>(reps)), stop(static_cast<size_t>(reps));
  spin(kSpinNs, stream);
  for (int r = 0; r < reps; ++r) {
    BENCH_CUDA(cudaEventRecord(start[r].get(), stream));
    BENCH_CUDA(cudaMemcpyAsync(dst.get(), src.get(), copy_bytes, cudaMemcpyDeviceToDevice, stream));
    BENCH_CUDA(cudaEventRecord(stop[r].get(), stream));
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));

  CopyCeiling c;
  c.copy_bytes = copy_bytes;
  for (int r = 0; r < reps; ++r) {
    const double s = elapsed_ms(start[r], stop[r]) * 1e-3;
    c.samples_tbps.push_back(2.0 * static_cast<double>(copy_bytes) / s / 1e12);
  }
  c.tbps = median_of(c.samples_tbps);
  return c;
}

}  // namespace spark_bench

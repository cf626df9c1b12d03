// How spark-bench times things (docs/benchmarks.md's method):
//   - each arm is captured ONCE as a CUDA graph that runs it for all L layers in sequence;
//   - warm-up replays of both graphs, then a batch of timed replays with the two graphs
//     alternated in ABBA order (A B, B A, A B, ...) so neither arm always runs first;
//   - the whole batch is queued behind a spin kernel, so the host keeps ahead of the GPU and
//     no replay waits for the CPU (checked per replay, and retried once with a 10x longer
//     spin: see AlternatedTimes::host_starved);
//   - each replay is bracketed by its own pair of cudaEvents; per-layer time = replay time / L.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <vector>

#include "tools/spark-bench/cuda_objects.h"

namespace spark_bench {

// Per-layer samples of one arm, in microseconds.
struct Samples {
  std::vector<double> us;
  double median() const;
  double min() const;
  double max() const;
};

double median_of(std::vector<double> v);

// Captures body() (which enqueues work on stream) into a graph, instantiates and uploads it.
GraphExec capture_graph(cudaStream_t stream, const std::function<void()>& body);

struct AlternatedTimes {
  Samples a, b;
  // Some replay's start event was reached before its graph and stop event were queued (so
  // its time may include waiting for the host), even after the retry.
  bool host_starved = false;
  int spin_retries = 0;
};

// Times graphs a and b (each running `layers` layers) as described above.
AlternatedTimes time_alternated(cudaGraphExec_t a, cudaGraphExec_t b, int layers, int warmup, int replays,
                                cudaStream_t stream);

// The copy ceiling: a device-to-device cudaMemcpyAsync of copy_bytes, counting the bytes read
// plus the bytes written; median over reps (after 2 warm-ups).  Halves copy_bytes until the
// two buffers fit.
struct CopyCeiling {
  double tbps = 0.0;  // 1e12 bytes/s
  size_t copy_bytes = 0;
  std::vector<double> samples_tbps;
};
CopyCeiling measure_copy_ceiling(cudaStream_t stream, size_t copy_bytes, int reps);

}  // namespace spark_bench

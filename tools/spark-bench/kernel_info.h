// Which of spark's kernels serves a row: its cache key and tile, as the op's generator would
// render it on this device's arch under the active tiling (SPARK_REGIMES, SPARK_OPROJ_TILES,
// SPARK_OPROJ_SCHEDULE), so a row of a sweep says what it timed (a ring that falls back to
// the tiled tile, the stationary schedule or not).
#pragma once

#include <string>

#include "tools/spark-bench/workload.h"

namespace spark_bench {

// "KEY: TILE" for the kernel of (shape, m, weights, out) on `arch` (e.g. "sm_90a"), or
// "unknown: WHY" when the generator refuses the key.
std::string kernel_of(const Shape& s, int m, WeightFormat w, OutDtype out, const std::string& arch);

}  // namespace spark_bench

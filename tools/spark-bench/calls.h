// The per-layer calls of the two arms, as views of the workload's buffers (workload.h): spark's
// arguments for either op and the staged arm's tensors.
#pragma once

#include "spark/spark.h"
#include "tools/spark-bench/staged.h"
#include "tools/spark-bench/workload.h"

namespace spark_bench {

// The device pointers of one layer's spark call.
struct CallPointers {
  const uint16_t* in = nullptr;      // q [M, H, K+R] or o [M, H, L]
  const void* w = nullptr;           // the layer's pack (bf16 or e4m3 values)
  const void* w_scale = nullptr;     // its scales (FP8 formats)
  void* out = nullptr;               // rows out_pitch apart
  const float* out_scale = nullptr;  // qproj's q_scale
};
CallPointers call_pointers(const LayerWeights& w, const Activations& act, int layer);

// The spark call of one layer with out's rows `pitch` elements apart (the output scale only
// for e4m3 output, w_scale only for FP8 weights, with the format's scale strides).
spark_mla_qproj_args qproj_args(const PackLayout& pack, WeightFormat format, const CallPointers& p, int m,
                                OutDtype out, int pitch);
spark_mla_oproj_args oproj_args(const PackLayout& pack, WeightFormat format, const CallPointers& p, int m,
                                OutDtype out, int pitch);

// The staged arm's outputs and scratch (either op), its output rows `pitch` elements apart.
StagedOutputs staged_outputs(const Activations& act, int pitch);
// The staged arm's tensors for one layer, its output rows `pitch` elements apart.
StagedTensors staged_qproj_tensors(const PackLayout& pack, const LayerWeights& w, const Activations& act,
                                   int layer, int m, int pitch);
StagedOprojTensors staged_oproj_tensors(const PackLayout& pack, const LayerWeights& w, const Activations& act,
                                        int layer, int m, int pitch);

}  // namespace spark_bench

// The kernels of the value up-projection a deployment needs, for spark-prewarm and
// `spark-cache check` (model presets give H per rank and V: ops/common/models.h).
#pragma once

#include <string>
#include <vector>

#include "jit/prewarm.h"
#include "ops/mla_oproj/key.h"

namespace spark::oproj {

// heads x v_dims x formats x dtypes x the regimes up to max_m, on arch.  Throws
// INVALID_ARGUMENT naming the tools' flags ('--heads', '--v-head-dim', '--max-m') for a
// shape the op does not implement.
std::vector<Key> expand(const std::vector<int>& heads, const std::vector<int>& v_dims, int max_m,
                        const std::vector<WeightFormat>& weights, const std::vector<OutDtype>& outs,
                        const std::string& arch);

// The build job of each key (its spec is rendered by the worker that builds it).
std::vector<PrewarmJob> prewarm_jobs(const std::vector<Key>& keys);

}  // namespace spark::oproj

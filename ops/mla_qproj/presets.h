// Model presets, explicit shape lists, and the kernels of the MLA query projection they
// need, for spark-prewarm and `spark-cache check`.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "jit/prewarm.h"
#include "ops/common/models.h"
#include "ops/mla_qproj/key.h"

namespace spark {

struct PrewarmSpec {
  std::vector<int> heads;
  std::vector<int> nope_dims;
  int latent_dim = 512;
  int rope_dim = 64;
  int max_m = kMaxM;
  std::vector<WeightFormat> weights{WeightFormat::kBf16};
  std::vector<OutDtype> outs{OutDtype::kBf16, OutDtype::kE4m3};
  std::string arch = "sm_90a";
};

// Heads per rank: total / tp where tp divides the heads, ceil(total / tp) for the preset's
// padded sizes; the preset's weight formats; throws INVALID_ARGUMENT for an unknown model or any other tp.  Errors name
// the flags of spark-prewarm and spark-cache check (--model, --tp, --max-m, ...).
PrewarmSpec preset_spec(std::string_view model, int tp);

// Every kernel key the spec needs: shapes x formats x dtypes x regimes up to max_m.
std::vector<KernelKey> expand(const PrewarmSpec& spec);

// The build job of each key (its spec is rendered by the worker that builds it).
std::vector<PrewarmJob> prewarm_jobs(const std::vector<KernelKey>& keys);
// prewarm() of those jobs.
std::vector<PrewarmResult> prewarm(KernelStore& store, const std::vector<KernelKey>& keys, int jobs,
                                   const std::function<void(const PrewarmResult&, size_t done)>& on_done = {});

}  // namespace spark

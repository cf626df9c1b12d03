// Filling the cache ahead of time: model presets, explicit shape lists, and a parallel
// build of every kernel they need.  Used by spark-prewarm; needs no GPU.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cache/kernel_store.h"

namespace spark {

struct PrewarmSpec {
  std::vector<int> heads;
  std::vector<int> nope_dims;
  int latent_dim = 512;
  int rope_dim = 64;
  int max_m = 8192;
  std::vector<WeightFormat> weights{WeightFormat::kBf16};
  std::vector<OutDtype> outs{OutDtype::kBf16, OutDtype::kE4m3};
  std::string arch = "sm_90a";
};

struct ModelPreset {
  std::string_view name;
  int nope_dim;
  int total_heads;
};
const std::vector<ModelPreset>& model_presets();
// Heads per rank = total / tp; throws INVALID_ARGUMENT for an unknown model or a tp that
// does not divide the heads.
PrewarmSpec preset_spec(std::string_view model, int tp);

// Every kernel key the spec needs: shapes x formats x dtypes x regimes up to max_m.
std::vector<KernelKey> expand(const PrewarmSpec& spec);

struct PrewarmResult {
  KernelKey key;
  bool ok = false;
  BuildSource source = BuildSource::kCacheHit;
  double ms = 0;
  std::string error;
  KernelResources resources;
};

// Builds every key with `jobs` threads; on_done is called (serialised) as each finishes.
std::vector<PrewarmResult> prewarm(KernelStore& store, const std::vector<KernelKey>& keys, int jobs,
                                   const std::function<void(const PrewarmResult&, size_t done)>& on_done = {});

}  // namespace spark

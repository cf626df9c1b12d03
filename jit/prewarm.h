// Filling the cache ahead of time: model presets, explicit shape lists, and a parallel
// build of every kernel they need.  Used by spark-prewarm; needs no GPU.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "jit/kernel_store.h"

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
  // Tensor-parallel sizes that do not divide the heads but are deployed with the heads
  // padded to a multiple (GLM-5 at TP 6: 11 heads per rank); unused slots are 0.
  int padded_tp[4];
};
const std::vector<ModelPreset>& model_presets();
// Heads per rank: total / tp where tp divides the heads, ceil(total / tp) for the preset's
// padded sizes; throws INVALID_ARGUMENT for an unknown model or any other tp.  Errors name
// the flags of spark-prewarm and spark-cache check (--model, --tp, --max-m, ...).
PrewarmSpec preset_spec(std::string_view model, int tp);

// Every kernel key the spec needs: shapes x formats x dtypes x regimes up to max_m.
std::vector<KernelKey> expand(const PrewarmSpec& spec);

struct PrewarmResult {
  KernelKey key;
  // False also for a kernel that compiled but is not in the cache when the prewarm ends
  // (the cache could not be written, or SPARK_CACHE_MAX_BYTES evicted it).
  bool ok = false;
  bool failed_after_report = false;  // found missing after on_done reported it built
  BuildSource source = BuildSource::kCacheHit;
  double ms = 0;
  std::string error;
  KernelResources resources;
  std::filesystem::path dir;  // the cache entry
};

// Builds every key with `jobs` threads; on_done is called (serialised) as each finishes.
// Then checks that every built kernel is still in the cache.
std::vector<PrewarmResult> prewarm(KernelStore& store, const std::vector<KernelKey>& keys, int jobs,
                                   const std::function<void(const PrewarmResult&, size_t done)>& on_done = {});

}  // namespace spark

#include "ops/mla_qproj/presets.h"

#include "core/error.h"
#include "ops/mla_qproj/render.h"
#include "ops/mla_qproj/tiles.h"

namespace spark {

PrewarmSpec preset_spec(std::string_view model, int tp) {
  const ModelPreset& p = model_preset(model);
  PrewarmSpec s;
  s.heads = {heads_per_rank(p, tp)};
  s.nope_dims = {p.nope_dim};
  s.weights = p.weights;
  return s;
}

std::vector<KernelKey> expand(const PrewarmSpec& spec) {
  SPARK_CHECK(spec.max_m >= 1 && spec.max_m <= kMaxM, SPARK_ERROR_INVALID_ARGUMENT,
              "argument '--max-m': {} is outside 1..{}", spec.max_m, kMaxM);
  SPARK_CHECK(!spec.heads.empty() && !spec.nope_dims.empty() && !spec.weights.empty() && !spec.outs.empty(),
              SPARK_ERROR_INVALID_ARGUMENT, "arguments '--heads', '--nope', '--weights' and '--out' must not be empty");
  for (int h : spec.heads)
    for (int k : spec.nope_dims) {
      const std::string shape =
          shape_problem(h, k, spec.latent_dim, spec.rope_dim, {"--heads", "--nope", "latent_dim", "rope_dim"});
      SPARK_CHECK(shape.empty(), SPARK_ERROR_INVALID_ARGUMENT, "{}", shape);
    }
  std::vector<KernelKey> keys;
  for (int h : spec.heads)
    for (int k : spec.nope_dims)
      for (WeightFormat w : spec.weights)
        for (OutDtype o : spec.outs)
          for (const RegimeEntry& e : regimes_up_to(spec.arch, spec.max_m))
            keys.push_back(KernelKey::of(h, k, e.regime, w, o, spec.arch, spec.latent_dim, spec.rope_dim));
  return keys;
}

std::vector<PrewarmJob> prewarm_jobs(const std::vector<KernelKey>& keys) {
  std::vector<PrewarmJob> jobs;
  jobs.reserve(keys.size());
  for (const KernelKey& key : keys) jobs.push_back({key.name(), [key]() -> KernelSpec { return render(key); }});
  return jobs;
}

std::vector<PrewarmResult> prewarm(KernelStore& store, const std::vector<KernelKey>& keys, int jobs,
                                   const std::function<void(const PrewarmResult&, size_t)>& on_done) {
  return prewarm(store, prewarm_jobs(keys), jobs, on_done);
}

}  // namespace spark

#include "ops/mla_qproj/presets.h"

#include <algorithm>

#include "core/error.h"
#include "ops/mla_qproj/render.h"
#include "ops/mla_qproj/tiles.h"

namespace spark {

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> kPresets = {
      {"glm5", 192, 64, {6, 0}, {WeightFormat::kBf16}},
      {"deepseek-v3", 128, 128, {0}, {WeightFormat::kBf16, WeightFormat::kFp8Block128}},
      {"kimi-k2", 128, 64, {0}, {WeightFormat::kBf16, WeightFormat::kFp8Block128}},
  };
  return kPresets;
}

PrewarmSpec preset_spec(std::string_view model, int tp) {
  for (const ModelPreset& p : model_presets()) {
    if (p.name != model) continue;
    const auto valid = [&](int t) {
      const bool padded = std::find(std::begin(p.padded_tp), std::end(p.padded_tp), t) != std::end(p.padded_tp);
      return t >= 1 && t <= p.total_heads && (p.total_heads % t == 0 || padded);
    };
    if (!valid(tp)) {
      std::string sizes;
      for (int t = 1; t <= p.total_heads; ++t)
        if (valid(t)) sizes += fmt::format("{}{}", sizes.empty() ? "" : ", ", t);
      SPARK_FAIL(SPARK_ERROR_INVALID_ARGUMENT,
                 "argument '--tp': {} is not a tensor-parallel size of {} ({} heads; sizes: {})", tp, model,
                 p.total_heads, sizes);
    }
    PrewarmSpec s;
    s.heads = {(p.total_heads + tp - 1) / tp};
    s.nope_dims = {p.nope_dim};
    s.weights = p.weights;
    return s;
  }
  std::string names;
  for (const ModelPreset& p : model_presets()) names += fmt::format("{}{}", names.empty() ? "" : ", ", p.name);
  SPARK_FAIL(SPARK_ERROR_INVALID_ARGUMENT, "argument '--model': unknown model '{}' (known: {})", model, names);
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

#include "cache/prewarm.h"

#include <atomic>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "generator/tile_config.h"

namespace spark {

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> kPresets = {
      {"glm5", 192, 64},
      {"deepseek-v3", 128, 128},
      {"kimi-k2", 128, 64},
  };
  return kPresets;
}

PrewarmSpec preset_spec(std::string_view model, int tp) {
  for (const ModelPreset& p : model_presets()) {
    if (p.name != model) continue;
    SPARK_CHECK(tp >= 1 && p.total_heads % tp == 0, SPARK_ERROR_INVALID_ARGUMENT,
                "argument 'tp': {} does not divide {}'s {} heads", tp, model, p.total_heads);
    PrewarmSpec s;
    s.heads = {p.total_heads / tp};
    s.nope_dims = {p.nope_dim};
    return s;
  }
  std::string names;
  for (const ModelPreset& p : model_presets()) names += fmt::format("{}{}", names.empty() ? "" : ", ", p.name);
  SPARK_FAIL(SPARK_ERROR_INVALID_ARGUMENT, "argument 'model': unknown model '{}' (known: {})", model, names);
}

std::vector<KernelKey> expand(const PrewarmSpec& spec) {
  SPARK_CHECK(spec.max_m >= 1 && spec.max_m <= 8192, SPARK_ERROR_INVALID_ARGUMENT,
              "argument 'max_m': {} is outside 1..8192", spec.max_m);
  std::vector<KernelKey> keys;
  for (int h : spec.heads)
    for (int k : spec.nope_dims)
      for (WeightFormat w : spec.weights)
        for (OutDtype o : spec.outs)
          for (const RegimeEntry& e : regimes_up_to(spec.arch, spec.max_m)) {
            KernelKey key;
            key.heads = h;
            key.k = k;
            key.n = spec.latent_dim;
            key.r = spec.rope_dim;
            key.regime = e.regime;
            key.weights = w;
            key.out = o;
            key.arch = spec.arch;
            keys.push_back(key);
          }
  return keys;
}

std::vector<PrewarmResult> prewarm(KernelStore& store, const std::vector<KernelKey>& keys, int jobs,
                                   const std::function<void(const PrewarmResult&, size_t)>& on_done) {
  std::vector<PrewarmResult> results(keys.size());
  std::atomic<size_t> next{0};
  size_t done = 0;
  std::mutex mu;
  auto worker = [&] {
    for (size_t i; (i = next++) < keys.size();) {
      PrewarmResult& r = results[i];
      r.key = keys[i];
      try {
        const BuiltKernel k = store.get(keys[i]);
        r.ok = true;
        r.source = k.source;
        r.ms = k.ms;
        r.resources = k.manifest.resources;
      } catch (const Error& e) {
        r.error = e.what();
      } catch (const std::exception& e) {
        r.error = e.what();
      }
      std::lock_guard<std::mutex> g(mu);
      ++done;
      if (on_done) on_done(r, done);
    }
  };
  const int n = std::max(1, std::min<int>(jobs, static_cast<int>(keys.size())));
  std::vector<std::thread> threads;
  for (int t = 1; t < n; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace spark

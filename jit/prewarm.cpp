#include "jit/prewarm.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "ops/mla_qproj/tiles.h"

namespace spark {

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> kPresets = {
      {"glm5", 192, 64, {6, 0}},
      {"deepseek-v3", 128, 128, {0}},
      {"kimi-k2", 128, 64, {0}},
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
    return s;
  }
  std::string names;
  for (const ModelPreset& p : model_presets()) names += fmt::format("{}{}", names.empty() ? "" : ", ", p.name);
  SPARK_FAIL(SPARK_ERROR_INVALID_ARGUMENT, "argument '--model': unknown model '{}' (known: {})", model, names);
}

std::vector<KernelKey> expand(const PrewarmSpec& spec) {
  SPARK_CHECK(spec.max_m >= 1 && spec.max_m <= 8192, SPARK_ERROR_INVALID_ARGUMENT,
              "argument '--max-m': {} is outside 1..8192", spec.max_m);
  SPARK_CHECK(!spec.heads.empty() && !spec.nope_dims.empty() && !spec.weights.empty() && !spec.outs.empty(),
              SPARK_ERROR_INVALID_ARGUMENT, "arguments '--heads', '--nope', '--weights' and '--out' must not be empty");
  for (int h : spec.heads)
    SPARK_CHECK(h >= 1 && h <= 128, SPARK_ERROR_INVALID_ARGUMENT, "argument '--heads': {} is outside 1..128", h);
  for (int k : spec.nope_dims)
    SPARK_CHECK(k == 128 || k == 192, SPARK_ERROR_INVALID_ARGUMENT,
                "argument '--nope': {} is not supported (128 or 192)", k);
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
        if (k.source != BuildSource::kCacheHit)
          log().info("compiled {} in {:.0f} ms (prewarm)", keys[i].name(), k.ms);
        r.source = k.source;
        r.ms = k.ms;
        r.resources = k.manifest.resources;
        r.dir = k.dir;
        r.ok = k.source != BuildSource::kCompiledInMemory;
        if (!r.ok) {
          const CacheAccess& dir = store.access();
          r.error = fmt::format("compiled, but not cached: the cache at {} {}", store.cache().root().string(),
                                dir.writable ? "could not take it (see the warning above)"
                                             : "cannot be written: " + dir.problem);
        }
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
  // A cache capped below the kernels' total size evicts some of them as the later ones are
  // published: a prewarm that leaves them out has not done its job.
  std::error_code ec;
  for (PrewarmResult& r : results) {
    if (!r.ok || std::filesystem::is_directory(r.dir, ec)) continue;
    r.ok = false;
    r.failed_after_report = true;
    r.error = fmt::format("built, but no longer in the cache (evicted: is SPARK_CACHE_MAX_BYTES = {} below the "
                          "kernels' total size?)",
                          env_string("SPARK_CACHE_MAX_BYTES").value_or("unset"));
  }
  return results;
}

}  // namespace spark

#include "ops/mla_oproj/presets.h"

#include "core/error.h"
#include "ops/mla_oproj/render.h"

namespace spark::oproj {

std::vector<Key> expand(const std::vector<int>& heads, const std::vector<int>& v_dims, int max_m,
                        const std::vector<WeightFormat>& weights, const std::vector<OutDtype>& outs,
                        const std::string& arch) {
  SPARK_CHECK(max_m >= 1 && max_m <= kMaxM, SPARK_ERROR_INVALID_ARGUMENT, "argument '--max-m': {} is outside 1..{}",
              max_m, kMaxM);
  for (int h : heads)
    for (int v : v_dims) {
      const std::string shape = shape_problem(h, 512, v, {"--heads", "latent_dim", "--v-head-dim"});
      SPARK_CHECK(shape.empty(), SPARK_ERROR_INVALID_ARGUMENT, "{}", shape);
    }
  std::vector<Key> keys;
  for (int h : heads)
    for (int v : v_dims)
      for (WeightFormat w : weights)
        for (OutDtype o : outs)
          for (const MRegime& r : regimes_up_to(max_m)) keys.push_back(Key::of(h, v, r, w, o, arch));
  return keys;
}

std::vector<PrewarmJob> prewarm_jobs(const std::vector<Key>& keys) {
  std::vector<PrewarmJob> jobs;
  jobs.reserve(keys.size());
  for (const Key& key : keys) jobs.push_back({key.name(), [key]() -> KernelSpec { return render(key); }});
  return jobs;
}

}  // namespace spark::oproj

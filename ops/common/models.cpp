#include "ops/common/models.h"

#include <algorithm>

#include "core/error.h"

namespace spark {

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> kPresets = {
      {"glm5", 192, 256, 64, {6, 0}, {WeightFormat::kBf16}},
      {"deepseek-v3", 128, 128, 128, {0}, {WeightFormat::kBf16, WeightFormat::kFp8Block128}},
      {"kimi-k2", 128, 128, 64, {0}, {WeightFormat::kBf16, WeightFormat::kFp8Block128}},
  };
  return kPresets;
}

const ModelPreset& model_preset(std::string_view model) {
  for (const ModelPreset& p : model_presets())
    if (p.name == model) return p;
  std::string names;
  for (const ModelPreset& p : model_presets()) names += fmt::format("{}{}", names.empty() ? "" : ", ", p.name);
  SPARK_FAIL(SPARK_ERROR_INVALID_ARGUMENT, "argument '--model': unknown model '{}' (known: {})", model, names);
}

int heads_per_rank(const ModelPreset& p, int tp) {
  const auto valid = [&](int t) {
    const bool padded = std::find(std::begin(p.padded_tp), std::end(p.padded_tp), t) != std::end(p.padded_tp);
    return t >= 1 && t <= p.total_heads && (p.total_heads % t == 0 || padded);
  };
  if (!valid(tp)) {
    std::string sizes;
    for (int t = 1; t <= p.total_heads; ++t)
      if (valid(t)) sizes += fmt::format("{}{}", sizes.empty() ? "" : ", ", t);
    SPARK_FAIL(SPARK_ERROR_INVALID_ARGUMENT,
               "argument '--tp': {} is not a tensor-parallel size of {} ({} heads; sizes: {})", tp, p.name,
               p.total_heads, sizes);
  }
  return (p.total_heads + tp - 1) / tp;
}

}  // namespace spark

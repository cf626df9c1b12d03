// The models spark ships presets for: their MLA shapes and the weight formats their
// checkpoints hold kv_b_proj in.  Every op's prewarm list reads them.
#pragma once

#include <string_view>
#include <vector>

#include "ops/common/formats.h"

namespace spark {

struct ModelPreset {
  std::string_view name;
  int nope_dim;     // K: qk_nope_head_dim
  int v_head_dim;   // V
  int total_heads;
  // Tensor-parallel sizes that do not divide the heads but are deployed with the heads
  // padded to a multiple (GLM-5 at TP 6: 11 heads per rank); unused slots are 0.
  int padded_tp[4];
  // The weight formats servers hold kv_b_proj in: bf16, and the block FP8 of the checkpoints
  // that ship it.
  std::vector<WeightFormat> weights;
};
const std::vector<ModelPreset>& model_presets();
// The preset of `model` and its heads per rank at `tp`: total / tp where tp divides the
// heads, ceil(total / tp) for the preset's padded sizes.  Throws INVALID_ARGUMENT naming
// '--model' (an unknown model) or '--tp' (any other size), the flags of the tools.
const ModelPreset& model_preset(std::string_view model);
int heads_per_rank(const ModelPreset& preset, int tp);

}  // namespace spark

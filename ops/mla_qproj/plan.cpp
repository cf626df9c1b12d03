#include "ops/mla_qproj/plan.h"

#include <algorithm>

#include "core/error.h"
#include "ops/common/regime_kernel.h"
#include "ops/mla_qproj/tiles.h"
#include "ops/mla_qproj/validate.h"
#include "runtime/launch.h"

namespace spark {

Plan::Plan(Context& ctx, const spark_mla_qproj_desc& desc, const spark_mla_qproj_plan_options& opts)
    : ctx_(ctx), desc_(desc), opts_(opts) {
  for (const RegimeEntry& e : regimes_up_to(ctx.arch(), opts.max_m)) {
    // validate_desc admitted only the enumerators, whose values the key's enums share.
    const KernelKey key = KernelKey::of(desc.heads, desc.nope_dim, e.regime,
                                        static_cast<WeightFormat>(enum_value(desc.weight_format)),
                                        static_cast<OutDtype>(enum_value(desc.out_dtype)), ctx.arch(),
                                        desc.latent_dim, desc.rope_dim);
    auto slot = std::make_unique<Slot>();
    slot->rendered = render(key);
    if (!opts.lazy) slot->kernel.store(&ctx.load(slot->rendered, "plan creation"), std::memory_order_release);
    slots_.push_back(std::move(slot));
  }
}

long long stationary_m_chunks(long long blocks, long long tiles_m, long long resident) {
  // A CTA per (head, N block, M chunk).  Waves x tiles per chunk is the critical path in
  // tiles; take the fewest chunks within 5 % of its minimum, so the weights are copied
  // into shared memory as few times as possible.
  resident = std::max<long long>(resident, 1);
  const auto cost = [&](long long chunks) {
    const long long per_chunk = (tiles_m + chunks - 1) / chunks;
    return (blocks * chunks + resident - 1) / resident * per_chunk;
  };
  long long best_cost = cost(1);
  for (long long chunks = 2; chunks <= tiles_m; ++chunks) best_cost = std::min(best_cost, cost(chunks));
  for (long long chunks = 1;; ++chunks) {
    if (cost(chunks) * 20 > best_cost * 21) continue;
    // The same tiles per chunk with no empty chunk.
    const long long per_chunk = (tiles_m + chunks - 1) / chunks;
    return (tiles_m + per_chunk - 1) / per_chunk;
  }
}

void Plan::run(const spark_mla_qproj_args* args, CUstream stream) {
  validate_args(desc_, args, opts_.max_m);
  const int m = args->m;
  Slot* slot = nullptr;
  for (const auto& s : slots_)
    if (s->rendered.op_key.regime.contains(m)) slot = s.get();
  SPARK_CHECK(slot != nullptr, SPARK_ERROR_INTERNAL, "no regime covers m = {}", m);
  ScopedCurrent current(ctx_.cu_context());
  const LoadedKernel& k =
      regime_kernel(ctx_, slot->kernel, slot->rendered, slot->rendered.op_key.regime, stream);

  MlaQprojParams p{};
  p.q_nope = args->q_nope;
  p.q_nope_stride_h = args->q_nope_stride_h;
  p.q_nope_stride_m = args->q_nope_stride_m;
  p.w = args->w;
  p.w_stride_h = args->w_stride_h;
  p.w_stride_k = args->w_stride_k;
  p.w_scale = args->w_scale;
  p.w_scale_stride_h = args->w_scale_stride_h;
  p.w_scale_stride_k = args->w_scale_stride_k;
  p.q_pe = args->q_pe;
  p.q_pe_stride_m = args->q_pe_stride_m;
  p.q_pe_stride_h = args->q_pe_stride_h;
  p.out = args->out;
  p.out_stride_m = args->out_stride_m;
  p.out_stride_h = args->out_stride_h;
  p.q_scale = args->q_scale;
  p.m = m;
  p.heads = desc_.heads;
  p.m_chunks = 1;

  const TileConfig& tile = slot->rendered.tile;
  const long long tiles_m = (m + tile.bm - 1) / tile.bm;
  const long long blocks = static_cast<long long>(desc_.latent_dim / tile.bn) * desc_.heads;
  LaunchSpec launch_spec;
  if (tile.stationary) {
    p.m_chunks = static_cast<int>(stationary_m_chunks(blocks, tiles_m, k.resident_ctas));
    launch_spec.grid_x = static_cast<unsigned>(blocks * p.m_chunks);
  } else {
    launch_spec.grid_x = static_cast<unsigned>(blocks * tiles_m);  // a CTA per tile
  }
  launch_spec.params = &p;
  launch_spec.stream = stream;
  launch_spec.pdl = opts_.enable_pdl != 0;
  launch(ctx_, k, launch_spec);
}

}  // namespace spark

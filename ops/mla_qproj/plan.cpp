#include "ops/mla_qproj/plan.h"

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
    slots_.add(ctx, render(key), opts.lazy != 0);
  }
}

void Plan::run(const spark_mla_qproj_args* args, CUstream stream) {
  validate_args(desc_, args, opts_.max_m);
  const int m = args->m;
  ScopedCurrent current(ctx_.cu_context());
  const auto [rendered, k] = slots_.pick(ctx_, m, stream);

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

  const TileConfig& tile = rendered.tile;
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

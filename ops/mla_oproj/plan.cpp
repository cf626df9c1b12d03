#include "ops/mla_oproj/plan.h"

#include <algorithm>

#include "core/c_enum.h"
#include "core/error.h"
#include "ops/common/regime_kernel.h"
#include "ops/mla_oproj/validate.h"
#include "runtime/launch.h"

namespace spark::oproj {

Plan::Plan(Context& ctx, const spark_mla_oproj_desc& desc, const spark_mla_qproj_plan_options& opts)
    : ctx_(ctx), desc_(desc), opts_(opts) {
  for (const MRegime& regime : regimes_up_to(opts.max_m)) {
    // validate_desc admitted only the enumerators, whose values the key's enums share.
    const Key key = Key::of(desc.heads, desc.v_head_dim, regime,
                            static_cast<WeightFormat>(enum_value(desc.weight_format)),
                            static_cast<OutDtype>(enum_value(desc.out_dtype)), ctx.arch(), desc.latent_dim);
    slots_.add(ctx, render(key), opts.lazy != 0);
  }
}

void Plan::run(const spark_mla_oproj_args* args, CUstream stream) {
  validate_args(desc_, args, opts_.max_m);
  const int m = args->m;
  ScopedCurrent current(ctx_.cu_context());
  const auto [rendered, k] = slots_.pick(ctx_, m, stream);

  MlaOprojParams p{};
  p.o = args->o;
  p.o_stride_m = args->o_stride_m;
  p.o_stride_h = args->o_stride_h;
  p.w = args->w;
  p.w_stride_h = args->w_stride_h;
  p.w_stride_v = args->w_stride_v;
  p.w_scale = args->w_scale;
  p.w_scale_stride_h = args->w_scale_stride_h;
  p.w_scale_stride_v = args->w_scale_stride_v;
  p.out = args->out;
  p.out_stride_m = args->out_stride_m;
  p.out_scale = args->out_scale;
  p.m = m;
  p.heads = desc_.heads;

  const Tile& tile = rendered.tile;
  const long long tiles_m = (m + tile.bm() - 1) / tile.bm();
  const long long blocks = static_cast<long long>(desc_.heads) * (desc_.v_head_dim / tile.bn);
  LaunchSpec launch_spec;
  p.m_chunks = 1;
  if (tile.stationary) {
    // A CTA per (head, column block, M chunk): each copies its weights once, and its teams
    // take its tiles in turn.
    p.m_chunks =
        static_cast<int>(stationary_chunks(tile, rendered.op_key.weights, blocks, tiles_m, k.resident_ctas));
    launch_spec.grid_x = static_cast<unsigned>(blocks * p.m_chunks);
  } else if (tile.ring) {
    // Half the CTAs the device holds (one an SM: the tile fits two), each walking a range
    // of (head, column block) units; the other half is room for the next kernel's.
    launch_spec.grid_x = static_cast<unsigned>(std::min(blocks, std::max(1LL, k.resident_ctas / 2LL)));
  } else {
    // A CTA per (head, column block, M tile), the M tiles of one block adjacent so that
    // they meet its weights in L2.
    launch_spec.grid_x = static_cast<unsigned>(blocks * tiles_m);
  }
  launch_spec.params = &p;
  launch_spec.stream = stream;
  launch_spec.pdl = opts_.enable_pdl != 0;
  launch(ctx_, k, launch_spec);
}

}  // namespace spark::oproj

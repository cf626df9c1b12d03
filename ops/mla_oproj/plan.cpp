#include "ops/mla_oproj/plan.h"

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
    auto slot = std::make_unique<Slot>();
    slot->rendered = render(key);
    if (!opts.lazy) slot->kernel.store(&ctx.load(slot->rendered, "plan creation"), std::memory_order_release);
    slots_.push_back(std::move(slot));
  }
}

void Plan::run(const spark_mla_oproj_args* args, CUstream stream) {
  validate_args(desc_, args, opts_.max_m);
  const int m = args->m;
  Slot* slot = nullptr;
  for (const auto& s : slots_)
    if (s->rendered.op_key.regime.contains(m)) slot = s.get();
  SPARK_CHECK(slot != nullptr, SPARK_ERROR_INTERNAL, "no regime covers m = {}", m);
  ScopedCurrent current(ctx_.cu_context());
  const LoadedKernel& k =
      regime_kernel(ctx_, slot->kernel, slot->rendered, slot->rendered.op_key.regime, stream);

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

  // A CTA per (head, column block, M tile), the M tiles of one block adjacent so that they
  // meet its weights in L2.
  const Tile& tile = slot->rendered.tile;
  const long long tiles_m = (m + tile.bm() - 1) / tile.bm();
  LaunchSpec launch_spec;
  launch_spec.grid_x = static_cast<unsigned>(static_cast<long long>(desc_.heads) * (desc_.v_head_dim / tile.bn) *
                                             tiles_m);
  launch_spec.params = &p;
  launch_spec.stream = stream;
  launch_spec.pdl = opts_.enable_pdl != 0;
  launch(ctx_, k, launch_spec);
}

}  // namespace spark::oproj

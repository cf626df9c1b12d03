// A plan: one descriptor on one context, with the kernel of every M-regime up to max_m.
// run() validates, picks the regime's kernel and launches: no compile, no allocation,
// no synchronisation (a lazy plan's first use of a regime aside).
#pragma once

#include "ops/common/regime_kernel.h"
#include "ops/common/schedule.h"
#include "ops/mla_qproj/render.h"
#include "runtime/context.h"
#include "spark/spark.h"
#include "templates/mla_qproj_params.h"  // the kernels' params: one struct for host and device

namespace spark {

class Plan {
 public:
  Plan(Context& ctx, const spark_mla_qproj_desc& desc, const spark_mla_qproj_plan_options& opts);

  void run(const spark_mla_qproj_args* args, CUstream stream);
  const spark_mla_qproj_desc& desc() const { return desc_; }
  int max_m() const { return opts_.max_m; }

 private:
  Context& ctx_;
  spark_mla_qproj_desc desc_;
  spark_mla_qproj_plan_options opts_;
  RegimeSlots<RenderedSource> slots_;  // one per regime, ordered by M
};

}  // namespace spark

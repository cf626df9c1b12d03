// A plan of the MLA value up-projection: one descriptor on one context, with the kernel of
// every M-regime up to max_m.  run() validates, picks the regime's kernel and launches: no
// compile, no allocation, no synchronisation (a lazy plan's first use of a regime aside).
#pragma once

#include "ops/common/regime_kernel.h"
#include "ops/mla_oproj/render.h"
#include "runtime/context.h"
#include "spark/spark.h"
#include "templates/mla_oproj_params.h"  // the kernel's params: one struct for host and device

namespace spark::oproj {

class Plan {
 public:
  Plan(Context& ctx, const spark_mla_oproj_desc& desc, const spark_mla_qproj_plan_options& opts);

  void run(const spark_mla_oproj_args* args, CUstream stream);

 private:
  Context& ctx_;
  spark_mla_oproj_desc desc_;
  spark_mla_qproj_plan_options opts_;
  RegimeSlots<RenderedSource> slots_;  // one per regime, ordered by M
};

}  // namespace spark::oproj

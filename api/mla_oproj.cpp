// The C API of the MLA value up-projection: can_implement, plans, run.
#include "api/c_boundary.h"
#include "ops/mla_oproj/plan.h"
#include "ops/mla_oproj/validate.h"

struct spark_mla_oproj_plan_s {
  std::unique_ptr<spark::oproj::Plan> impl;
};

using spark::guarded;

extern "C" {

spark_status spark_mla_oproj_can_implement(const spark_mla_oproj_desc* desc, const spark_mla_oproj_args* args) {
  return guarded([&] {
    spark::oproj::validate_desc(desc);
    if (args) spark::oproj::validate_args(*desc, args, spark::oproj::kMaxM);
  });
}

spark_status spark_mla_oproj_plan_create(spark_context ctx, const spark_mla_oproj_desc* desc,
                                         const spark_mla_qproj_plan_options* opts, spark_mla_oproj_plan* out) {
  return guarded([&] {
    SPARK_CHECK_ARG(ctx != nullptr, "ctx", "must not be NULL");
    SPARK_CHECK_ARG(out != nullptr, "out", "must not be NULL");
    *out = nullptr;
    spark::oproj::validate_desc(desc);
    const spark_mla_qproj_plan_options o = spark::plan_options_or_default(opts, spark::oproj::kMaxM);
    auto plan = std::make_unique<spark_mla_oproj_plan_s>();
    plan->impl = std::make_unique<spark::oproj::Plan>(*ctx->impl, *desc, o);
    *out = plan.release();
  });
}

void spark_mla_oproj_plan_destroy(spark_mla_oproj_plan plan) {
  try {
    delete plan;
  } catch (...) {
  }
}

spark_status spark_mla_oproj_run(spark_mla_oproj_plan plan, const spark_mla_oproj_args* args,
                                 spark_stream stream) {
  return guarded([&] {
    SPARK_CHECK_ARG(plan != nullptr, "plan", "must not be NULL");
    plan->impl->run(args, reinterpret_cast<CUstream>(stream));
  });
}

}  // extern "C"

#include "tools/spark-bench/kernel_info.h"

#include "core/error.h"
#include "ops/mla_oproj/render.h"
#include "ops/mla_qproj/render.h"
#include "ops/mla_qproj/tiles.h"

namespace spark_bench {

namespace {

template <class Rendered>
std::string describe(const Rendered& r) {
  return r.key + ": " + r.summary;
}

}  // namespace

std::string kernel_of(const Shape& s, int m, WeightFormat w, OutDtype out, const std::string& arch) {
  try {
    if (s.op == Op::kQproj) {
      const spark::MRegime regime = spark::regime_for_m(arch, m).regime;
      return describe(spark::render(spark::KernelKey::of(s.heads, s.dim, regime, w, out, arch)));
    }
    for (const spark::MRegime& regime : spark::oproj::regimes())
      if (regime.contains(m))
        return describe(spark::oproj::render(spark::oproj::Key::of(s.heads, s.dim, regime, w, out, arch)));
    return "unknown: no regime serves M = " + std::to_string(m);
  } catch (const spark::Error& e) {
    return std::string("unknown: ") + e.what();
  }
}

}  // namespace spark_bench

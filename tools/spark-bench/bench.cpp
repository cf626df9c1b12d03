#include "tools/spark-bench/bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>

#include "tools/spark-bench/cuda_objects.h"
#include "tools/spark-bench/device_ops.h"

namespace spark_bench {

namespace {

constexpr uint8_t kPoisonByte = 0xFF;  // bf16 0xFFFF and e4m3 0xFF are NaN: unwritten output is caught

struct PlanSlot {
  SparkPlan plan;
  std::string status = "ok";
  std::string message;
};

PlanSlot make_plan(spark_context ctx, int heads, int nope, WeightFormat w, OutDtype out, int max_m, bool pdl,
                   const Table& table) {
  spark_mla_qproj_desc desc;
  std::memset(&desc, 0, sizeof desc);
  desc.struct_size = sizeof desc;
  desc.heads = heads;
  desc.nope_dim = nope;
  desc.latent_dim = kLatent;
  desc.rope_dim = kRope;
  desc.weight_format = to_spark(w);
  desc.out_dtype = to_spark(out);
  spark_mla_qproj_plan_options opts;
  std::memset(&opts, 0, sizeof opts);
  opts.struct_size = sizeof opts;
  opts.max_m = max_m;
  opts.lazy = 0;  // prewarm every regime now: nothing compiles while timing
  opts.enable_pdl = pdl ? 1 : 0;

  PlanSlot slot;
  spark_mla_qproj_plan p = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  const spark_status s = spark_mla_qproj_plan_create(ctx, &desc, &opts, &p);
  const std::string msg = spark_last_error();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (s == SPARK_SUCCESS) {
    slot.plan.reset(p);
    if (secs > 1.0)
      table.note(fmt::format("plan H={} K={} {} -> {} max_m={} created in {:.1f} s (NVRTC compiles)", heads, nope,
                             to_string(w), to_string(out), max_m, secs));
  } else {
    slot.status = s == SPARK_ERROR_UNSUPPORTED ? "unsupported" : "error";
    slot.message = fmt::format("spark_mla_qproj_plan_create -> {}: {}", spark_status_string(s), msg);
  }
  return slot;
}

size_t out_elems(int heads, int m) { return static_cast<size_t>(m) * heads * kOutCols; }

// Fills the first m rows of both arms' outputs with NaN bytes.
void poison_outputs(const Activations& act, int m, OutDtype out, cudaStream_t stream) {
  const size_t n = out_elems(act.heads(), m);
  if (out == OutDtype::kBf16) {
    BENCH_CUDA(cudaMemsetAsync(act.spark_out(), kPoisonByte, n * 2, stream));
    BENCH_CUDA(cudaMemsetAsync(act.staged_cat(), kPoisonByte, n * 2, stream));
  } else {
    BENCH_CUDA(cudaMemsetAsync(act.spark_out(), kPoisonByte, n, stream));
    BENCH_CUDA(cudaMemsetAsync(act.staged_e4m3(), kPoisonByte, n, stream));
  }
}

// Compares spark's output with the staged arm's (the first m rows, every column).
CheckCounts compare_outputs(const BenchEnv& env, const Activations& act, int m, OutDtype out) {
  const size_t n = out_elems(act.heads(), m);
  BENCH_CUDA(cudaMemsetAsync(env.counters, 0, 3 * sizeof(unsigned long long), env.stream));
  if (out == OutDtype::kBf16) {
    compare_bf16(static_cast<const uint16_t*>(act.spark_out()), act.staged_cat(), n, env.counters, env.stream);
  } else {
    compare_e4m3(static_cast<const uint8_t*>(act.spark_out()), act.staged_e4m3(), n, env.counters, env.stream);
  }
  unsigned long long c[3] = {0, 0, 0};
  BENCH_CUDA(cudaMemcpyAsync(c, env.counters, sizeof c, cudaMemcpyDeviceToHost, env.stream));
  BENCH_CUDA(cudaStreamSynchronize(env.stream));
  CheckCounts r;
  r.compared = n;
  r.differ = c[0];
  r.bad = c[1];
  r.nan_spark = c[2];
  return r;
}

Row base_row(int heads, int nope, int m, WeightFormat w, OutDtype out) {
  Row r;
  r.heads = heads;
  r.nope = nope;
  r.m = m;
  r.weights = w;
  r.out = out;
  r.bytes = floor_bytes(heads, nope, m, w, out);
  return r;
}

Row run_row(const BenchOptions& o, const BenchEnv& env, const PackLayout& pack, const LayerWeights& weights,
            const Activations& act, spark_mla_qproj_plan plan, int m, OutDtype out) {
  Row r = base_row(pack.heads, pack.nope, m, weights.format(), out);
  const int layers = weights.layers();
  r.layers = layers;
  const bool e4m3 = out == OutDtype::kE4m3;
  const spark_stream sst = reinterpret_cast<spark_stream>(env.stream);

  std::vector<spark_mla_qproj_args> args;
  args.reserve(static_cast<size_t>(layers));
  for (int l = 0; l < layers; ++l) args.push_back(spark_args(pack, weights, act, l, m, out));
  auto staged_layer = [&](int l) {
    enqueue_staged(env.cublas, staged_tensors(pack, weights, act, l, m), e4m3, o.quant, env.stream);
  };

  try {
    // Layer 0, outside any graph: spark's output must match the staged path's before a time
    // of it means anything.
    poison_outputs(act, m, out, env.stream);
    BENCH_SPARK(spark_mla_qproj_run(plan, &args[0], sst));
    staged_layer(0);
    r.pre = compare_outputs(env, act, m, out);

    GraphExec spark_graph = capture_graph(env.stream, [&] {
      for (int l = 0; l < layers; ++l) BENCH_SPARK(spark_mla_qproj_run(plan, &args[static_cast<size_t>(l)], sst));
    });
    GraphExec staged_graph = capture_graph(env.stream, [&] {
      for (int l = 0; l < layers; ++l) staged_layer(l);
    });
    const AlternatedTimes t =
        time_alternated(spark_graph.exec, staged_graph.exec, layers, o.warmup, o.replays, env.stream);
    r.spark = t.a;
    r.staged = t.b;
    r.host_starved = t.host_starved;

    // Both outputs now hold the last layer, written by the replayed graphs: a graph that
    // launched nothing (or the wrong thing) leaves layer 0's output behind and fails here.
    r.post = compare_outputs(env, act, m, out);
  } catch (const SparkError& e) {
    r.status = "error";
    r.message = e.what();
  }
  return r;
}

bool wants_e4m3(const BenchOptions& o) {
  return std::find(o.outs.begin(), o.outs.end(), OutDtype::kE4m3) != o.outs.end();
}

int max_m(const BenchOptions& o) { return *std::max_element(o.ms.begin(), o.ms.end()); }

uint64_t shape_seed(int heads, int nope, int salt) {
  return 0x5EEDB0A7ull ^ (static_cast<uint64_t>(heads) << 40) ^ (static_cast<uint64_t>(nope) << 20) ^
         static_cast<uint64_t>(salt);
}

std::string mib(size_t b) { return fmt::format("{:.0f} MiB", static_cast<double>(b) / (1 << 20)); }

}  // namespace

size_t row_count(const BenchOptions& o) {
  return o.heads.size() * o.nopes.size() * o.ms.size() * o.weights.size() * o.outs.size();
}

void run_shape(const BenchOptions& o, const BenchEnv& env, int heads, int nope, const Table& table,
               std::vector<Row>& rows) {
  const PackLayout pack{heads, nope};
  const size_t fixed = activation_bytes(heads, nope, max_m(o), wants_e4m3(o), o.quant);
  std::optional<Activations> act;  // made when the first format has a plan

  for (const WeightFormat wf : o.weights) {
    std::vector<PlanSlot> plans;
    bool any_ok = false;
    for (const OutDtype out : o.outs) {
      plans.push_back(make_plan(env.ctx, heads, nope, wf, out, max_m(o), o.pdl, table));
      const PlanSlot& p = plans.back();
      if (p.status == "ok") {
        any_ok = true;
        continue;
      }
      table.skipped_plan(heads, nope, wf, out, p.status, p.message, o.ms.size());
      for (const int m : o.ms) {
        rows.push_back(base_row(heads, nope, m, wf, out));
        rows.back().status = p.status;
        rows.back().message = p.message;
      }
    }
    if (!any_ok) continue;

    const LayerPlan lp = plan_layers(heads, nope, wf, fixed, o.layers, env.l2_bytes, env.budget_bytes);
    if (lp.layers == 0) {
      const std::string msg = fmt::format("one layer ({} + {} of activations) does not fit in the {} budget",
                                          mib(lp.bytes_per_layer), mib(fixed), mib(env.budget_bytes));
      for (size_t i = 0; i < o.outs.size(); ++i) {
        if (plans[i].status != "ok") continue;
        table.skipped_plan(heads, nope, wf, o.outs[i], "error", msg, o.ms.size());
        for (const int m : o.ms) {
          rows.push_back(base_row(heads, nope, m, wf, o.outs[i]));
          rows.back().status = "error";
          rows.back().message = msg;
        }
      }
      continue;
    }
    if (lp.reduced_by_memory)
      table.note(fmt::format("H={} K={} {}: {} layers, not {}: more would exceed the {} budget", heads, nope,
                             to_string(wf), lp.layers, lp.requested, mib(env.budget_bytes)));
    else if (!lp.l2_multiple_met)
      table.note(fmt::format("H={} K={} {}: {} layers hold less than {}x the L2 in weights (memory budget)", heads,
                             nope, to_string(wf), lp.layers, kL2Multiple));

    if (!act) act.emplace(heads, nope, max_m(o), wants_e4m3(o), o.quant, shape_seed(heads, nope, 1), env.stream);
    const LayerWeights weights(pack, wf, lp.layers, shape_seed(heads, nope, 2 + static_cast<int>(wf)), env.stream);

    for (const int m : o.ms) {
      for (size_t i = 0; i < o.outs.size(); ++i) {
        if (plans[i].status != "ok") continue;
        rows.push_back(run_row(o, env, pack, weights, *act, plans[i].plan.get(), m, o.outs[i]));
        table.row(rows.back(), env.ceiling_tbps);
      }
    }
  }
}

void describe_plan(const BenchOptions& o, size_t l2_bytes, size_t budget_bytes, const Table& table) {
  table.note(fmt::format("{} rows; L2 {}; memory budget {}; at least {} layers, raised to hold >= {}x the L2",
                         row_count(o), mib(l2_bytes), mib(budget_bytes), o.layers, kL2Multiple));
  for (const int h : o.heads) {
    for (const int k : o.nopes) {
      const size_t fixed = activation_bytes(h, k, max_m(o), wants_e4m3(o), o.quant);
      for (const WeightFormat wf : o.weights) {
        const LayerPlan lp = plan_layers(h, k, wf, fixed, o.layers, l2_bytes, budget_bytes);
        table.note(fmt::format("H={:<3} K={} {:<5}: {:>3} layers x {:>8} + {:>8} activations = {:>9}; "
                               "weights read per replay {:>8}{}",
                               h, k, to_string(wf), lp.layers, mib(lp.bytes_per_layer), mib(fixed),
                               mib(lp.total_bytes()),
                               mib(weight_bytes_read(h, k, wf) * static_cast<size_t>(lp.layers)),
                               lp.reduced_by_memory ? "  (REDUCED by the budget)" : ""));
      }
    }
  }
}

}  // namespace spark_bench

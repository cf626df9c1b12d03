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

spark_mla_qproj_desc make_desc(int heads, int nope, WeightFormat w, OutDtype out) {
  spark_mla_qproj_desc desc;
  std::memset(&desc, 0, sizeof desc);
  desc.struct_size = sizeof desc;
  desc.heads = heads;
  desc.nope_dim = nope;
  desc.latent_dim = kLatent;
  desc.rope_dim = kRope;
  desc.weight_format = to_spark(w);
  desc.out_dtype = to_spark(out);
  return desc;
}

PlanSlot make_plan(spark_context ctx, int heads, int nope, WeightFormat w, OutDtype out, int max_m, bool pdl,
                   const Table& table) {
  const spark_mla_qproj_desc desc = make_desc(heads, nope, w, out);
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

size_t out_rows(int heads, int m) { return static_cast<size_t>(m) * heads; }

// Fills the first m rows of both arms' outputs with NaN bytes, pad columns included: what
// either arm leaves unwritten reads as NaN, and spark's pad must still hold them afterwards.
void poison_outputs(const Activations& act, int m, int pitch, OutDtype out, cudaStream_t stream) {
  const size_t n = out_rows(act.heads(), m) * static_cast<size_t>(pitch);
  if (out == OutDtype::kBf16) {
    BENCH_CUDA(cudaMemsetAsync(act.spark_out(), kPoisonByte, n * 2, stream));
    BENCH_CUDA(cudaMemsetAsync(act.staged_cat(), kPoisonByte, n * 2, stream));
  } else {
    BENCH_CUDA(cudaMemsetAsync(act.spark_out(), kPoisonByte, n, stream));
    BENCH_CUDA(cudaMemsetAsync(act.staged_e4m3(), kPoisonByte, n, stream));
  }
}

// Compares spark's output with the staged arm's: the 576 columns of the first m rows, and
// that spark left its pad columns alone.
CheckCounts compare_outputs(const BenchEnv& env, const Activations& act, int m, int pitch, OutDtype out) {
  const size_t rows = out_rows(act.heads(), m);
  BENCH_CUDA(cudaMemsetAsync(env.counters, 0, kCompareCounters * sizeof(unsigned long long), env.stream));
  if (out == OutDtype::kBf16) {
    compare_bf16(static_cast<const uint16_t*>(act.spark_out()), act.staged_cat(), rows, pitch, env.counters,
                 env.stream);
  } else {
    compare_e4m3(static_cast<const uint8_t*>(act.spark_out()), act.staged_e4m3(), rows, pitch, env.counters,
                 env.stream);
  }
  unsigned long long c[kCompareCounters] = {};
  BENCH_CUDA(cudaMemcpyAsync(c, env.counters, sizeof c, cudaMemcpyDeviceToHost, env.stream));
  BENCH_CUDA(cudaStreamSynchronize(env.stream));
  CheckCounts r;
  r.compared = rows * kOutCols;
  r.differ = c[0];
  r.bad = c[1];
  r.nan_spark = c[2];
  r.pad_written = c[3];
  return r;
}

Row base_row(int heads, int nope, int m, WeightFormat w, OutDtype out, int pitch) {
  Row r;
  r.heads = heads;
  r.nope = nope;
  r.m = m;
  r.weights = w;
  r.out = out;
  r.out_pitch = pitch;
  r.bytes = floor_bytes(heads, nope, m, w, out);
  return r;
}

Row run_row(const BenchOptions& o, const BenchEnv& env, const PackLayout& pack, const LayerWeights& weights,
            const Activations& act, spark_mla_qproj_plan plan, int m, OutDtype out, int pitch) {
  Row r = base_row(pack.heads, pack.nope, m, weights.format(), out, pitch);
  const int layers = weights.layers();
  r.layers = layers;
  const bool e4m3 = out == OutDtype::kE4m3;
  const spark_stream sst = reinterpret_cast<spark_stream>(env.stream);

  std::vector<spark_mla_qproj_args> args;
  args.reserve(static_cast<size_t>(layers));
  for (int l = 0; l < layers; ++l)
    args.push_back(spark_args(pack, weights.format(), call_pointers(weights, act, l), m, out, pitch));
  auto staged_layer = [&](int l) {
    enqueue_staged(env.cublas, staged_tensors(pack, weights, act, l, m, pitch), e4m3, o.quant, env.stream);
  };

  try {
    // Layer 0, outside any graph: spark's output must match the staged path's before a time
    // of it means anything.
    poison_outputs(act, m, pitch, out, env.stream);
    BENCH_SPARK(spark_mla_qproj_run(plan, &args[0], sst));
    staged_layer(0);
    r.pre = compare_outputs(env, act, m, pitch, out);

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
    r.post = compare_outputs(env, act, m, pitch, out);
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
int max_pitch(const BenchOptions& o) { return *std::max_element(o.out_pitches.begin(), o.out_pitches.end()); }

size_t fixed_bytes(const BenchOptions& o, int heads, int nope) {
  return activation_bytes(heads, nope, max_m(o), max_pitch(o), wants_e4m3(o), o.quant);
}

// Records the rows of one plan (every M and pitch) as skipped with status and message.
void skip_rows(const BenchOptions& o, int heads, int nope, WeightFormat w, OutDtype out, const std::string& status,
               const std::string& message, const Table& table, std::vector<Row>& rows) {
  table.skipped_plan(heads, nope, w, out, status, message, o.ms.size() * o.out_pitches.size());
  for (const int m : o.ms) {
    for (const int pitch : o.out_pitches) {
      rows.push_back(base_row(heads, nope, m, w, out, pitch));
      rows.back().status = status;
      rows.back().message = message;
    }
  }
}

// A distinct, 256-byte aligned address for each buffer of a row, laid out as the real
// allocations would be (nothing is dereferenced: spark_mla_qproj_can_implement only checks
// alignment, strides and that out overlaps no input).
CallPointers fake_pointers(const BenchOptions& o, const PackLayout& pack) {
  uintptr_t next = uintptr_t{1} << 40;
  auto take = [&](size_t bytes) {
    const uintptr_t p = next;
    next += (bytes + 255) / 256 * 256 + 256;
    return p;
  };
  CallPointers p;
  p.q = reinterpret_cast<const uint16_t*>(take(static_cast<size_t>(max_m(o)) * pack.heads * (pack.nope + kRope) * 2));
  p.w = reinterpret_cast<const void*>(take(pack.bf16_bytes()));
  p.w_scale = reinterpret_cast<const void*>(take(pack.bf16_bytes()));
  p.out = reinterpret_cast<void*>(take(static_cast<size_t>(max_m(o)) * pack.heads * max_pitch(o) * 2));
  p.q_scale = reinterpret_cast<const float*>(take(sizeof(float)));
  return p;
}

// Whether spark accepts the calls of one (H, K, format) for every (out, pitch) at the largest
// M: "; spark accepts its N calls", else a line per call it refuses, with its message.
std::string implement_text(const BenchOptions& o, const PackLayout& pack, WeightFormat wf) {
  std::string refused;
  size_t calls = 0;
  for (const OutDtype out : o.outs) {
    const spark_mla_qproj_desc desc = make_desc(pack.heads, pack.nope, wf, out);
    for (const int pitch : o.out_pitches) {
      const spark_mla_qproj_args a = spark_args(pack, wf, fake_pointers(o, pack), max_m(o), out, pitch);
      ++calls;
      const spark_status st = spark_mla_qproj_can_implement(&desc, &a);
      if (st == SPARK_SUCCESS) continue;
      const std::string msg = spark_last_error();  // read right after the call: it is per thread
      refused += fmt::format("\n#   out={} pitch={}: spark refuses: {}: {}", to_string(out), pitch,
                             spark_status_string(st), msg);
    }
  }
  return refused.empty() ? fmt::format("; spark accepts its {} calls", calls) : refused;
}

uint64_t shape_seed(int heads, int nope, int salt) {
  return 0x5EEDB0A7ull ^ (static_cast<uint64_t>(heads) << 40) ^ (static_cast<uint64_t>(nope) << 20) ^
         static_cast<uint64_t>(salt);
}

std::string mib(size_t b) { return fmt::format("{:.0f} MiB", static_cast<double>(b) / (1 << 20)); }

}  // namespace

size_t row_count(const BenchOptions& o) {
  return o.heads.size() * o.nopes.size() * o.ms.size() * o.weights.size() * o.outs.size() * o.out_pitches.size();
}

void run_shape(const BenchOptions& o, const BenchEnv& env, int heads, int nope, const Table& table,
               std::vector<Row>& rows) {
  const PackLayout pack{heads, nope};
  const size_t fixed = fixed_bytes(o, heads, nope);
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
      skip_rows(o, heads, nope, wf, out, p.status, p.message, table, rows);
    }
    if (!any_ok) continue;

    const LayerPlan lp = plan_layers(heads, nope, wf, fixed, o.layers, env.l2_bytes, env.budget_bytes);
    if (lp.layers == 0) {
      const std::string msg = fmt::format("one layer ({} + {} of activations) does not fit in the {} budget",
                                          mib(lp.bytes_per_layer), mib(fixed), mib(env.budget_bytes));
      for (size_t i = 0; i < o.outs.size(); ++i)
        if (plans[i].status == "ok") skip_rows(o, heads, nope, wf, o.outs[i], "error", msg, table, rows);
      continue;
    }
    if (lp.reduced_by_memory)
      table.note(fmt::format("H={} K={} {}: {} layers, not {}: more would exceed the {} budget", heads, nope,
                             to_string(wf), lp.layers, lp.requested, mib(env.budget_bytes)));
    else if (!lp.l2_multiple_met)
      table.note(fmt::format("H={} K={} {}: {} layers hold less than {}x the L2 in weights (memory budget)", heads,
                             nope, to_string(wf), lp.layers, kL2Multiple));

    if (!act)
      act.emplace(heads, nope, max_m(o), max_pitch(o), wants_e4m3(o), o.quant, shape_seed(heads, nope, 1),
                  env.stream);
    const LayerWeights weights(pack, wf, lp.layers, shape_seed(heads, nope, 2 + static_cast<int>(wf)), env.stream);

    for (const int m : o.ms) {
      for (const int pitch : o.out_pitches) {
        for (size_t i = 0; i < o.outs.size(); ++i) {
          if (plans[i].status != "ok") continue;
          rows.push_back(run_row(o, env, pack, weights, *act, plans[i].plan.get(), m, o.outs[i], pitch));
          table.row(rows.back(), env.ceiling_tbps);
        }
      }
    }
  }
}

void describe_plan(const BenchOptions& o, size_t l2_bytes, size_t budget_bytes, const Table& table) {
  std::string pitches;
  for (const int p : o.out_pitches) pitches += fmt::format("{}{}", pitches.empty() ? "" : ",", p);
  table.note(fmt::format("{} rows; L2 {}; memory budget {}; at least {} layers, raised to hold >= {}x the L2; "
                         "M up to {}; out row pitch {}",
                         row_count(o), mib(l2_bytes), mib(budget_bytes), o.layers, kL2Multiple, max_m(o), pitches));
  size_t peak = 0;
  for (const int h : o.heads) {
    for (const int k : o.nopes) {
      const size_t fixed = fixed_bytes(o, h, k);
      for (const WeightFormat wf : o.weights) {
        const LayerPlan lp = plan_layers(h, k, wf, fixed, o.layers, l2_bytes, budget_bytes);
        peak = std::max(peak, lp.total_bytes());
        table.note(fmt::format("H={:<3} K={} {:<9}: {:>3} layers x {:>8} + {:>8} activations = {:>9}; "
                               "weights read per replay {:>8}{}{}",
                               h, k, to_string(wf), lp.layers, mib(lp.bytes_per_layer), mib(fixed),
                               mib(lp.total_bytes()),
                               mib(weight_bytes_read(h, k, wf) * static_cast<size_t>(lp.layers)),
                               lp.reduced_by_memory ? "  (REDUCED by the budget)" : "",
                               implement_text(o, PackLayout{h, k}, wf)));
      }
    }
  }
  table.note(fmt::format("largest group: {} of the {} budget", mib(peak), mib(budget_bytes)));
}

}  // namespace spark_bench

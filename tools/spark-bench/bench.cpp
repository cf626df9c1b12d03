#include "tools/spark-bench/bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "tools/spark-bench/calls.h"
#include "tools/spark-bench/cuda_objects.h"
#include "tools/spark-bench/device_ops.h"
#include "tools/spark-bench/kernel_info.h"

namespace spark_bench {

namespace {

constexpr uint8_t kPoisonByte = 0xFF;  // bf16 0xFFFF and e4m3 0xFF are NaN: unwritten output is caught

// A plan of the run's op: only that op's holder is set.
struct PlanSlot {
  SparkPlan qproj;
  OprojPlan oproj;
  std::string status = "ok";
  std::string message;
};

spark_mla_qproj_desc qproj_desc(int heads, int nope, WeightFormat w, OutDtype out) {
  spark_mla_qproj_desc desc = SPARK_MLA_QPROJ_DESC_INIT;
  desc.heads = heads;
  desc.nope_dim = nope;
  desc.latent_dim = kLatent;
  desc.rope_dim = kRope;
  desc.weight_format = to_spark(w);
  desc.out_dtype = to_spark(out);
  return desc;
}

spark_mla_oproj_desc oproj_desc(int heads, int v, WeightFormat w, OutDtype out) {
  spark_mla_oproj_desc desc = SPARK_MLA_OPROJ_DESC_INIT;
  desc.heads = heads;
  desc.latent_dim = kLatent;
  desc.v_head_dim = v;
  desc.weight_format = to_spark(w);
  desc.out_dtype = to_spark(out);
  return desc;
}

PlanSlot make_plan(spark_context ctx, const Shape& s, WeightFormat w, OutDtype out, int max_m, bool pdl,
                   const Table& table) {
  spark_mla_qproj_plan_options opts = SPARK_MLA_QPROJ_PLAN_OPTIONS_INIT;  // both ops' plan options
  opts.max_m = max_m;
  opts.lazy = 0;  // prewarm every regime now: nothing compiles while timing
  opts.enable_pdl = pdl ? 1 : 0;

  PlanSlot slot;
  spark_status st = SPARK_SUCCESS;
  std::string msg;
  const auto t0 = std::chrono::steady_clock::now();
  if (s.op == Op::kQproj) {
    const spark_mla_qproj_desc desc = qproj_desc(s.heads, s.dim, w, out);
    spark_mla_qproj_plan p = nullptr;
    st = spark_mla_qproj_plan_create(ctx, &desc, &opts, &p);
    msg = spark_last_error();
    slot.qproj.reset(p);
  } else {
    const spark_mla_oproj_desc desc = oproj_desc(s.heads, s.dim, w, out);
    spark_mla_oproj_plan p = nullptr;
    st = spark_mla_oproj_plan_create(ctx, &desc, &opts, &p);
    msg = spark_last_error();
    slot.oproj.reset(p);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (st == SPARK_SUCCESS) {
    if (secs > 1.0)
      table.note(fmt::format("plan H={} {}={} {} -> {} max_m={} created in {:.1f} s (NVRTC compiles)", s.heads,
                             s.dim_name(), s.dim, to_string(w), to_string(out), max_m, secs));
  } else {
    slot.status = st == SPARK_ERROR_UNSUPPORTED ? "unsupported" : "error";
    slot.message = fmt::format("spark_mla_{}_plan_create -> {}: {}", op_name(s.op), spark_status_string(st), msg);
  }
  return slot;
}

// Fills the first `rows` rows of both arms' outputs with NaN bytes, pad columns included: what
// either arm leaves unwritten reads as NaN, and spark's pad must still hold them afterwards.
void poison_outputs(const Activations& act, size_t rows, int pitch, OutDtype out, cudaStream_t stream) {
  const size_t n = rows * static_cast<size_t>(pitch);
  if (out == OutDtype::kBf16) {
    BENCH_CUDA(cudaMemsetAsync(act.spark_out(), kPoisonByte, n * 2, stream));
    BENCH_CUDA(cudaMemsetAsync(act.staged_bf16(), kPoisonByte, n * 2, stream));
  } else {
    BENCH_CUDA(cudaMemsetAsync(act.spark_out(), kPoisonByte, n, stream));
    BENCH_CUDA(cudaMemsetAsync(act.staged_e4m3(), kPoisonByte, n, stream));
  }
}

// Compares spark's output with the staged arm's: the out_cols() columns of the rows of m
// tokens, and that spark left its pad columns alone, and the `guard` rows after them (the next
// token's, poisoned too where the buffer has them): every byte of those counts as pad.
CheckCounts compare_outputs(const BenchEnv& env, const Activations& act, int m, int guard, int pitch, OutDtype out) {
  const size_t rows = act.shape().out_rows(m);
  const size_t guard_rows = act.shape().out_rows(m + guard) - rows;
  const int cols = act.shape().out_cols();
  const size_t past = rows * static_cast<size_t>(pitch);
  BENCH_CUDA(cudaMemsetAsync(env.counters, 0, kCompareCounters * sizeof(unsigned long long), env.stream));
  if (out == OutDtype::kBf16) {
    const auto* spark = static_cast<const uint16_t*>(act.spark_out());
    compare_bf16(spark, act.staged_bf16(), rows, cols, pitch, env.counters, env.stream);
    // cols 0: the staged side is never read.
    if (guard_rows > 0) compare_bf16(spark + past, act.staged_bf16(), guard_rows, 0, pitch, env.counters, env.stream);
  } else {
    const auto* spark = static_cast<const uint8_t*>(act.spark_out());
    compare_e4m3(spark, act.staged_e4m3(), rows, cols, pitch, env.counters, env.stream);
    if (guard_rows > 0) compare_e4m3(spark + past, act.staged_e4m3(), guard_rows, 0, pitch, env.counters, env.stream);
  }
  unsigned long long c[kCompareCounters] = {};
  BENCH_CUDA(cudaMemcpyAsync(c, env.counters, sizeof c, cudaMemcpyDeviceToHost, env.stream));
  BENCH_CUDA(cudaStreamSynchronize(env.stream));
  CheckCounts r;
  r.compared = rows * static_cast<size_t>(cols);
  r.differ = c[0];
  r.bad = c[1];
  r.nan_spark = c[2];
  r.pad_written = c[3];
  return r;
}

Row base_row(const Shape& s, int m, WeightFormat w, OutDtype out, int pitch) {
  Row r;
  r.op = s.op;
  r.heads = s.heads;
  r.dim = s.dim;
  r.m = m;
  r.weights = w;
  r.out = out;
  r.out_pitch = pitch;
  r.bytes = floor_bytes(s, m, w, out);
  return r;
}

// What one row's calls are made of.
struct RowCalls {
  const BenchEnv& env;
  PackLayout pack;
  const LayerWeights& weights;
  const Activations& act;
  int m;
  OutDtype out;
  int pitch;
  StagedQuant quant;
  StagedBmm bmm;
};

// The row's staged options on an op's tensors (the query projection's bmm has one form).
void set_staged_bmm(StagedTensors&, StagedBmm) {}
void set_staged_bmm(StagedOprojTensors& t, StagedBmm bmm) { t.bmm = bmm; }

// The two arms of one row, each enqueueing one layer.
struct Arms {
  std::function<void(int)> spark, staged;
};

// An op's arms: its spark arguments for every layer (made once, before capture) and its
// staged tensors (Args and Staged: the op's types, see calls.h).
template <typename Plan, typename Args, typename Staged>
Arms make_arms(const RowCalls& c, const char* run_name, spark_status (*run)(Plan, const Args*, spark_stream),
               Plan plan, Args (*args_of)(const PackLayout&, WeightFormat, const CallPointers&, int, OutDtype, int),
               Staged (*staged_of)(const PackLayout&, const LayerWeights&, const Activations&, int, int, int)) {
  std::vector<Args> args;
  args.reserve(static_cast<size_t>(c.weights.layers()));
  for (int l = 0; l < c.weights.layers(); ++l)
    args.push_back(args_of(c.pack, c.weights.format(), call_pointers(c.weights, c.act, l), c.m, c.out, c.pitch));
  const spark_stream sst = reinterpret_cast<spark_stream>(c.env.stream);
  Arms a;
  a.spark = [=, args = std::move(args)](int l) {
    check_spark(run(plan, &args[static_cast<size_t>(l)], sst), run_name);
  };
  a.staged = [c, staged_of](int l) {
    Staged t = staged_of(c.pack, c.weights, c.act, l, c.m, c.pitch);
    set_staged_bmm(t, c.bmm);
    enqueue_staged(c.env.cublas, t, c.out == OutDtype::kE4m3, c.quant, c.env.stream);
  };
  return a;
}

int max_m(const BenchOptions& o) { return *std::max_element(o.ms.begin(), o.ms.end()); }

Row run_row(const BenchOptions& o, const BenchEnv& env, const Shape& s, const LayerWeights& weights,
            const Activations& act, const PlanSlot& plan, int m, OutDtype out, int pitch) {
  Row r = base_row(s, m, weights.format(), out, pitch);
  if (s.op == Op::kOproj) r.staged_bmm = o.staged_bmm == StagedBmm::kInto ? "into" : "copy";
  r.kernel = kernel_of(s, m, weights.format(), out, env.arch);
  const int layers = weights.layers();
  r.layers = layers;
  const RowCalls calls{env, s.pack(), weights, act, m, out, pitch, o.quant, o.staged_bmm};
  const Arms arms = s.op == Op::kQproj ? make_arms(calls, "spark_mla_qproj_run", spark_mla_qproj_run,
                                                   plan.qproj.get(), qproj_args, staged_qproj_tensors)
                                       : make_arms(calls, "spark_mla_oproj_run", spark_mla_oproj_run,
                                                   plan.oproj.get(), oproj_args, staged_oproj_tensors);

  try {
    // Layer 0, outside any graph: spark's output must match the staged path's before a time
    // of it means anything.
    // The next token's rows too, where the buffers have them: spark must not write them.
    const int guard = m < max_m(o) ? 1 : 0;
    poison_outputs(act, s.out_rows(m + guard), pitch, out, env.stream);
    arms.spark(0);
    arms.staged(0);
    r.pre = compare_outputs(env, act, m, guard, pitch, out);

    GraphExec spark_graph = capture_graph(env.stream, [&] {
      for (int l = 0; l < layers; ++l) arms.spark(l);
    });
    GraphExec staged_graph = capture_graph(env.stream, [&] {
      for (int l = 0; l < layers; ++l) arms.staged(l);
    });
    const AlternatedTimes t =
        time_alternated(spark_graph.exec, staged_graph.exec, layers, o.warmup, o.replays, env.stream);
    r.spark = t.a;
    r.staged = t.b;
    r.host_starved = t.host_starved;

    // Both outputs now hold the last layer, written by the replayed graphs: a graph that
    // launched nothing (or the wrong thing) leaves layer 0's output behind and fails here.
    r.post = compare_outputs(env, act, m, guard, pitch, out);
  } catch (const SparkError& e) {
    r.status = "error";
    r.message = e.what();
  }
  return r;
}

bool wants_e4m3(const BenchOptions& o) {
  return std::find(o.outs.begin(), o.outs.end(), OutDtype::kE4m3) != o.outs.end();
}

int max_pitch(const BenchOptions& o, const Shape& s) {
  const std::vector<int> p = row_pitches(o, s);
  return *std::max_element(p.begin(), p.end());
}

size_t fixed_bytes(const BenchOptions& o, const Shape& s) {
  return activation_bytes(s, max_m(o), max_pitch(o, s), wants_e4m3(o), o.quant);
}

// Records the rows of one plan (every M and pitch) as skipped with status and message.
void skip_rows(const BenchOptions& o, const Shape& s, WeightFormat w, OutDtype out, const std::string& status,
               const std::string& message, const Table& table, std::vector<Row>& rows) {
  const std::vector<int> pitches = row_pitches(o, s);
  table.skipped_plan(s, w, out, status, message, o.ms.size() * pitches.size());
  for (const int m : o.ms) {
    for (const int pitch : pitches) {
      rows.push_back(base_row(s, m, w, out, pitch));
      rows.back().status = status;
      rows.back().message = message;
    }
  }
}

// A distinct, 256-byte aligned address for each buffer of a row, laid out as the real
// allocations would be (nothing is dereferenced: can_implement only checks alignment, strides
// and that out overlaps no input).
CallPointers fake_pointers(const BenchOptions& o, const Shape& s) {
  uintptr_t next = uintptr_t{1} << 40;
  auto take = [&](size_t bytes) {
    const uintptr_t p = next;
    next += (bytes + 255) / 256 * 256 + 256;
    return p;
  };
  const PackLayout pack = s.pack();
  CallPointers p;
  p.in = reinterpret_cast<const uint16_t*>(take(s.in_elems(max_m(o)) * 2));
  p.w = reinterpret_cast<const void*>(take(pack.bf16_bytes()));
  p.w_scale = reinterpret_cast<const void*>(take(pack.bf16_bytes()));
  p.out = reinterpret_cast<void*>(take(s.out_rows(max_m(o)) * static_cast<size_t>(max_pitch(o, s)) * 2));
  p.out_scale = reinterpret_cast<const float*>(take(sizeof(float)));
  return p;
}

// spark's answer to one call of the op at the largest M (spark_last_error() has its message).
spark_status can_implement(const BenchOptions& o, const Shape& s, WeightFormat wf, OutDtype out, int pitch) {
  const CallPointers p = fake_pointers(o, s);
  if (s.op == Op::kQproj) {
    const spark_mla_qproj_desc desc = qproj_desc(s.heads, s.dim, wf, out);
    const spark_mla_qproj_args a = qproj_args(s.pack(), wf, p, max_m(o), out, pitch);
    return spark_mla_qproj_can_implement(&desc, &a);
  }
  const spark_mla_oproj_desc desc = oproj_desc(s.heads, s.dim, wf, out);
  const spark_mla_oproj_args a = oproj_args(s.pack(), wf, p, max_m(o), out, pitch);
  return spark_mla_oproj_can_implement(&desc, &a);
}

// Whether spark accepts the calls of one (shape, format) for every (out, pitch) at the largest
// M: "; spark accepts its N calls", else a line per call it refuses, with its message.
std::string implement_text(const BenchOptions& o, const Shape& s, WeightFormat wf) {
  std::string refused;
  size_t calls = 0;
  for (const OutDtype out : o.outs) {
    for (const int pitch : row_pitches(o, s)) {
      ++calls;
      const spark_status st = can_implement(o, s, wf, out, pitch);
      if (st == SPARK_SUCCESS) continue;
      const std::string msg = spark_last_error();  // read right after the call: it is per thread
      refused += fmt::format("\n#   out={} pitch={}: spark refuses: {}: {}", to_string(out), pitch,
                             spark_status_string(st), msg);
    }
  }
  return refused.empty() ? fmt::format("; spark accepts its {} calls", calls) : refused;
}

uint64_t shape_seed(const Shape& s, int salt) {
  return 0x5EEDB0A7ull ^ (static_cast<uint64_t>(s.heads) << 40) ^ (static_cast<uint64_t>(s.dim) << 20) ^
         static_cast<uint64_t>(salt);
}

std::string mib(size_t b) { return fmt::format("{:.0f} MiB", static_cast<double>(b) / (1 << 20)); }

std::string join(const std::vector<int>& v) {
  std::string s;
  for (const int x : v) s += fmt::format("{}{}", s.empty() ? "" : ",", x);
  return s;
}

}  // namespace

size_t row_count(const BenchOptions& o) {
  const size_t layouts = o.op == Op::kQproj ? o.out_pitches.size() : o.out_pads.size();
  return o.heads.size() * o.dims.size() * o.ms.size() * o.weights.size() * o.outs.size() * layouts;
}

std::vector<int> row_pitches(const BenchOptions& o, const Shape& s) {
  if (s.op == Op::kQproj) return o.out_pitches;
  std::vector<int> p;
  for (const int pad : o.out_pads) p.push_back(s.out_cols() + pad);
  return p;
}

void run_shape(const BenchOptions& o, const BenchEnv& env, const Shape& shape, const Table& table,
               std::vector<Row>& rows) {
  const PackLayout pack = shape.pack();
  const size_t fixed = fixed_bytes(o, shape);
  const std::string name = fmt::format("H={} {}={}", shape.heads, shape.dim_name(), shape.dim);
  std::optional<Activations> act;  // made when the first format has a plan

  for (const WeightFormat wf : o.weights) {
    std::vector<PlanSlot> plans;
    bool any_ok = false;
    for (const OutDtype out : o.outs) {
      plans.push_back(make_plan(env.ctx, shape, wf, out, max_m(o), o.pdl, table));
      const PlanSlot& p = plans.back();
      if (p.status == "ok") {
        any_ok = true;
        continue;
      }
      skip_rows(o, shape, wf, out, p.status, p.message, table, rows);
    }
    if (!any_ok) continue;

    const LayerPlan lp = plan_layers(pack, wf, fixed, o.layers, env.l2_bytes, env.budget_bytes);
    if (lp.layers == 0) {
      const std::string msg = fmt::format("one layer ({} + {} of activations) does not fit in the {} budget",
                                          mib(lp.bytes_per_layer), mib(fixed), mib(env.budget_bytes));
      for (size_t i = 0; i < o.outs.size(); ++i)
        if (plans[i].status == "ok") skip_rows(o, shape, wf, o.outs[i], "error", msg, table, rows);
      continue;
    }
    if (lp.reduced_by_memory)
      table.note(fmt::format("{} {}: {} layers, not {}: more would exceed the {} budget", name, to_string(wf),
                             lp.layers, lp.requested, mib(env.budget_bytes)));
    else if (!lp.l2_multiple_met)
      table.note(fmt::format("{} {}: {} layers hold less than {}x the L2 in weights (memory budget)", name,
                             to_string(wf), lp.layers, kL2Multiple));

    if (!act)
      act.emplace(shape, max_m(o), max_pitch(o, shape), wants_e4m3(o), o.quant, shape_seed(shape, 1), env.stream);
    const LayerWeights weights(pack, wf, lp.layers, shape_seed(shape, 2 + static_cast<int>(wf)), env.stream);

    for (const int m : o.ms) {
      for (const int pitch : row_pitches(o, shape)) {
        for (size_t i = 0; i < o.outs.size(); ++i) {
          if (plans[i].status != "ok") continue;
          rows.push_back(run_row(o, env, shape, weights, *act, plans[i], m, o.outs[i], pitch));
          table.row(rows.back(), env.ceiling_tbps);
        }
      }
    }
  }
}

void describe_plan(const BenchOptions& o, size_t l2_bytes, size_t budget_bytes, const std::string& arch,
                   const Table& table) {
  const std::string layout = o.op == Op::kQproj ? "out row pitch " + join(o.out_pitches)
                                                : "out row pitch H*V + pad, pad " + join(o.out_pads);
  table.note(fmt::format("{}{} rows; L2 {}; memory budget {}; at least {} layers, raised to hold >= {}x the L2; "
                         "M up to {}; {}",
                         o.op == Op::kQproj ? "" : "oproj: ", row_count(o), mib(l2_bytes), mib(budget_bytes),
                         o.layers, kL2Multiple, max_m(o), layout));
  size_t peak = 0;
  for (const int h : o.heads) {
    for (const int d : o.dims) {
      const Shape s{o.op, h, d};
      const size_t fixed = fixed_bytes(o, s);
      for (const WeightFormat wf : o.weights) {
        const LayerPlan lp = plan_layers(s.pack(), wf, fixed, o.layers, l2_bytes, budget_bytes);
        peak = std::max(peak, lp.total_bytes());
        table.note(fmt::format("H={:<3} {}={} {:<9}: {:>3} layers x {:>8} + {:>8} activations = {:>9}; "
                               "weights read per replay {:>8}{}{}",
                               h, s.dim_name(), d, to_string(wf), lp.layers, mib(lp.bytes_per_layer), mib(fixed),
                               mib(lp.total_bytes()),
                               mib(weight_bytes_read(s.pack(), wf) * static_cast<size_t>(lp.layers)),
                               lp.reduced_by_memory ? "  (REDUCED by the budget)" : "",
                               implement_text(o, s, wf)));
        // The kernels these rows run on `arch`, each once, in M order.
        std::vector<std::string> kernels;
        for (const int m : o.ms)
          for (const OutDtype out : o.outs) {
            std::string k = kernel_of(s, m, wf, out, arch);
            if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(std::move(k));
          }
        for (const std::string& k : kernels) table.note("  " + arch + " kernel " + k);
      }
    }
  }
  table.note(fmt::format("largest group: {} of the {} budget", mib(peak), mib(budget_bytes)));
}

}  // namespace spark_bench

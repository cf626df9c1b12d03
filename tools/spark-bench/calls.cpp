#include "tools/spark-bench/calls.h"


namespace spark_bench {

namespace {

// The pack's pointer moved to the op's first row of head 0 (the values are bf16 or e4m3).
const void* used_rows(const void* pack_values, const PackLayout& pack, WeightFormat format) {
  const int64_t bytes = pack.w_offset() * (format == WeightFormat::kBf16 ? 2 : 1);
  return static_cast<const uint8_t*>(pack_values) + bytes;
}

}  // namespace

CallPointers call_pointers(const LayerWeights& w, const Activations& act, int layer) {
  CallPointers p;
  p.in = act.in();
  if (w.format() == WeightFormat::kBf16) {
    p.w = w.bf16(layer);
  } else {
    p.w = w.e4m3(layer);
    p.w_scale = w.scales(layer);
  }
  p.out = act.spark_out();
  p.out_scale = act.out_scale();
  return p;
}

spark_mla_qproj_args qproj_args(const PackLayout& pack, WeightFormat format, const CallPointers& p, int m,
                                OutDtype out, int pitch) {
  spark_mla_qproj_args a = SPARK_MLA_QPROJ_ARGS_INIT;
  a.m = m;
  const int nope = pack.used_rows;
  const int64_t q_stride_h = nope + kRope;
  const int64_t q_stride_m = static_cast<int64_t>(pack.heads) * (nope + kRope);
  a.q_nope = p.in;
  a.q_nope_stride_h = q_stride_h;
  a.q_nope_stride_m = q_stride_m;
  a.q_pe = p.in + nope;
  a.q_pe_stride_m = q_stride_m;
  a.q_pe_stride_h = q_stride_h;
  a.w = p.w;
  a.w_stride_h = pack.w_stride_h();
  a.w_stride_k = PackLayout::w_stride_row();
  a.w_scale_stride_h = pack.scale_stride_h(format);
  a.w_scale_stride_k = PackLayout::scale_stride_row(format);
  a.w_scale = format == WeightFormat::kBf16 ? nullptr : p.w_scale;
  a.out = p.out;
  a.out_stride_h = pitch;
  a.out_stride_m = static_cast<int64_t>(pack.heads) * pitch;
  a.q_scale = out == OutDtype::kE4m3 ? p.out_scale : nullptr;
  return a;
}

spark_mla_oproj_args oproj_args(const PackLayout& pack, WeightFormat format, const CallPointers& p, int m,
                                OutDtype out, int pitch) {
  spark_mla_oproj_args a = SPARK_MLA_OPROJ_ARGS_INIT;
  a.m = m;
  a.o = p.in;
  a.o_stride_m = static_cast<int64_t>(pack.heads) * kLatent;
  a.o_stride_h = kLatent;
  a.w = used_rows(p.w, pack, format);
  a.w_stride_h = pack.w_stride_h();
  a.w_stride_v = PackLayout::w_stride_row();
  a.w_scale = format == WeightFormat::kBf16
                  ? nullptr
                  : static_cast<const uint8_t*>(p.w_scale) + pack.scale_offset_bytes(format);
  a.w_scale_stride_h = pack.scale_stride_h(format);
  a.w_scale_stride_v = PackLayout::scale_stride_row(format);
  a.out = p.out;
  a.out_stride_m = pitch;
  a.out_scale = out == OutDtype::kE4m3 ? p.out_scale : nullptr;
  return a;
}

StagedOutputs staged_outputs(const Activations& act, int pitch) {
  StagedOutputs o;
  o.out_pitch = pitch;
  o.bmm_out = act.bmm_out();
  o.bf16_out = act.staged_bf16();
  o.out_e4m3 = act.staged_e4m3();
  o.f32_a = act.f32_a();
  o.f32_b = act.f32_b();
  o.scale = act.out_scale();
  return o;
}

StagedTensors staged_qproj_tensors(const PackLayout& pack, const LayerWeights& w, const Activations& act,
                                   int layer, int m, int pitch) {
  StagedTensors t;
  t.heads = pack.heads;
  t.nope = pack.used_rows;
  t.m = m;
  t.q = act.in();
  t.w = w.bf16(layer);
  t.w_stride_h = pack.w_stride_h();
  t.w_stride_k = PackLayout::w_stride_row();
  t.out = staged_outputs(act, pitch);
  return t;
}

StagedOprojTensors staged_oproj_tensors(const PackLayout& pack, const LayerWeights& w, const Activations& act,
                                        int layer, int m, int pitch) {
  StagedOprojTensors t;
  t.heads = pack.heads;
  t.v = pack.used_rows;
  t.m = m;
  t.o = act.in();
  t.o_stride_m = static_cast<int64_t>(pack.heads) * kLatent;
  t.o_stride_h = kLatent;
  t.w = static_cast<const uint16_t*>(used_rows(w.bf16(layer), pack, WeightFormat::kBf16));
  t.w_stride_h = pack.w_stride_h();
  t.w_stride_v = PackLayout::w_stride_row();
  t.out = staged_outputs(act, pitch);
  return t;
}

}  // namespace spark_bench

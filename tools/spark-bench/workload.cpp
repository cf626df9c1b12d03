#include "tools/spark-bench/workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "tools/spark-bench/device_ops.h"

namespace spark_bench {

namespace {

size_t out_elems(int heads, int m, int pitch = kOutCols) { return static_cast<size_t>(m) * heads * pitch; }

}  // namespace

std::string out_pitch_problem(int pitch) {
  if (pitch >= kOutCols && pitch % kOutPitchMultiple == 0) return "";
  return fmt::format("{} is not an output row pitch: it must be >= {} (N + R) and a multiple of {} elements "
                     "(spark's rule for out strides; bf16 rows then start 16-byte aligned, e4m3 rows 8-byte "
                     "aligned)",
                     pitch, kOutCols, kOutPitchMultiple);
}

bool sector_aligned_pitch(int pitch, OutDtype out) {
  constexpr int kSectorBytes = 32;
  return (pitch * (out == OutDtype::kBf16 ? 2 : 1)) % kSectorBytes == 0;
}

int64_t block_rows_read(int heads, int nope) {
  int64_t count = 0, last = -1;  // the heads' row ranges ascend, so a shared block is the last one
  for (int h = 0; h < heads; ++h) {
    const int64_t first_row = static_cast<int64_t>(h) * (nope + kPackExtraRows);
    const int64_t first = std::max(first_row / kBlock, last + 1);
    const int64_t end = (first_row + nope - 1) / kBlock;
    if (end >= first) count += end - first + 1;
    last = std::max(last, end);
  }
  return count;
}

size_t weight_bytes_read(int heads, int nope, WeightFormat w) {
  const size_t hk = static_cast<size_t>(heads) * nope;
  switch (w) {
    case WeightFormat::kBf16: return hk * kLatent * 2;
    case WeightFormat::kMxfp8: return hk * kLatent + hk * kScalesPerRow;
    case WeightFormat::kFp8Block128:
      return hk * kLatent + static_cast<size_t>(block_rows_read(heads, nope)) * kBlockScaleCols * sizeof(float);
  }
  return 0;
}

double floor_bytes(int heads, int nope, int m, WeightFormat w, OutDtype out) {
  const double mh = static_cast<double>(m) * heads;
  return static_cast<double>(weight_bytes_read(heads, nope, w)) + mh * nope * 2 + mh * kRope * 2 +
         mh * kOutCols * (out == OutDtype::kBf16 ? 2 : 1);
}

size_t activation_bytes(int heads, int nope, int max_m, int max_pitch, bool any_e4m3, StagedQuant quant) {
  const size_t out = out_elems(heads, max_m, max_pitch);
  size_t b = static_cast<size_t>(max_m) * heads * (nope + kRope) * 2;  // q
  b += out * 2;                                                         // spark out (bf16-sized)
  b += out * 2;                                                         // staged bf16 out / concat
  b += static_cast<size_t>(heads) * max_m * kLatent * 2;                // bmm out
  if (any_e4m3) {
    b += out;                                                           // staged e4m3 out
    if (quant == StagedQuant::kEager) b += 2 * out_elems(heads, max_m) * 4;  // fp32 scratch
  }
  return b;
}

LayerPlan plan_layers(int heads, int nope, WeightFormat format, size_t fixed_bytes, int requested,
                      size_t l2_bytes, size_t budget_bytes) {
  const PackLayout pack{heads, nope};
  LayerPlan p;
  p.requested = requested;
  p.fixed_bytes = fixed_bytes;
  p.bytes_per_layer = pack.bf16_bytes();
  if (is_fp8(format)) p.bytes_per_layer += pack.e4m3_bytes() + pack.scale_bytes(format);
  // Both arms of a row use the same L; the smaller per-layer read (spark's FP8) decides.
  const size_t read = weight_bytes_read(heads, nope, format);
  const size_t want_bytes = static_cast<size_t>(kL2Multiple) * l2_bytes;
  const int l2_layers = static_cast<int>((want_bytes + read - 1) / read);
  const int want = std::max(requested, l2_layers);
  const size_t cap = budget_bytes > fixed_bytes ? (budget_bytes - fixed_bytes) / p.bytes_per_layer : 0;
  p.layers = static_cast<int>(std::min<size_t>(static_cast<size_t>(want), cap));
  p.reduced_by_memory = p.layers < requested;
  p.l2_multiple_met = p.layers >= l2_layers;
  return p;
}

Activations::Activations(int heads, int nope, int max_m, int max_pitch, bool any_e4m3, StagedQuant quant,
                         uint64_t seed, cudaStream_t stream)
    : heads_(heads), nope_(nope), max_pitch_(max_pitch) {
  const size_t out = out_elems(heads, max_m, max_pitch);
  const size_t q_elems = static_cast<size_t>(max_m) * heads * (nope + kRope);
  q_.alloc(q_elems * 2);
  spark_out_.alloc(out * 2);
  staged_cat_.alloc(out * 2);
  bmm_out_.alloc(static_cast<size_t>(heads) * max_m * kLatent * 2);
  if (any_e4m3) {
    staged_e4m3_.alloc(out);
    if (quant == StagedQuant::kEager) {
      f32_a_.alloc(out_elems(heads, max_m) * 4);
      f32_b_.alloc(out_elems(heads, max_m) * 4);
    }
  }
  q_scale_.alloc(sizeof(float));
  fill_bf16_random(q_.as<uint16_t>(), q_elems, seed, 1.0f, stream);
  const float scale = kQScale;
  BENCH_CUDA(cudaMemcpyAsync(q_scale_.get(), &scale, sizeof scale, cudaMemcpyHostToDevice, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
}

LayerWeights::LayerWeights(const PackLayout& pack, WeightFormat format, int layers, uint64_t seed,
                           cudaStream_t stream)
    : pack_(pack), format_(format), layers_(layers) {
  const size_t n = static_cast<size_t>(layers);
  bf16_.alloc(pack.bf16_bytes() * n);
  if (format == WeightFormat::kBf16) {
    fill_bf16_random(bf16_.as<uint16_t>(), bf16_.bytes() / 2, seed, kWeightScale, stream);
  } else if (format == WeightFormat::kMxfp8) {
    e4m3_.alloc(pack.e4m3_bytes() * n);
    scales_.alloc(pack.scale_bytes(format) * n);
    fill_mxfp8_random(e4m3_.as<uint8_t>(), e4m3_.bytes(), scales_.as<uint8_t>(), scales_.bytes(), seed, stream);
    dequant_mxfp8(e4m3_.as<uint8_t>(), scales_.as<uint8_t>(), bf16_.as<uint16_t>(),
                  static_cast<size_t>(pack.rows()) * n, stream);
  } else {
    e4m3_.alloc(pack.e4m3_bytes() * n);
    scales_.alloc(pack.scale_bytes(format) * n);
    fill_fp8_block_random(e4m3_.as<uint8_t>(), e4m3_.bytes(), scales_.as<float>(), scales_.bytes() / sizeof(float),
                          seed, stream);
    dequant_fp8_block(e4m3_.as<uint8_t>(), scales_.as<float>(), bf16_.as<uint16_t>(),
                      static_cast<size_t>(pack.rows()), static_cast<size_t>(pack.block_rows()), n, stream);
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));
}

const uint16_t* LayerWeights::bf16(int layer) const {
  return bf16_.as<uint16_t>() + static_cast<size_t>(layer) * (pack_.bf16_bytes() / 2);
}
const uint8_t* LayerWeights::e4m3(int layer) const {
  return e4m3_.get() == nullptr ? nullptr : e4m3_.as<uint8_t>() + static_cast<size_t>(layer) * pack_.e4m3_bytes();
}
const void* LayerWeights::scales(int layer) const {
  return scales_.get() == nullptr ? nullptr
                                  : scales_.as<uint8_t>() + static_cast<size_t>(layer) * pack_.scale_bytes(format_);
}

CallPointers call_pointers(const LayerWeights& w, const Activations& act, int layer) {
  CallPointers p;
  p.q = act.q();
  if (w.format() == WeightFormat::kBf16) {
    p.w = w.bf16(layer);
  } else {
    p.w = w.e4m3(layer);
    p.w_scale = w.scales(layer);
  }
  p.out = act.spark_out();
  p.q_scale = act.q_scale();
  return p;
}

spark_mla_qproj_args spark_args(const PackLayout& pack, WeightFormat format, const CallPointers& p, int m,
                                OutDtype out, int pitch) {
  spark_mla_qproj_args a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.m = m;
  const int64_t q_stride_h = pack.nope + kRope;
  const int64_t q_stride_m = static_cast<int64_t>(pack.heads) * (pack.nope + kRope);
  a.q_nope = p.q;
  a.q_nope_stride_h = q_stride_h;
  a.q_nope_stride_m = q_stride_m;
  a.q_pe = p.q + pack.nope;
  a.q_pe_stride_m = q_stride_m;
  a.q_pe_stride_h = q_stride_h;
  a.w = p.w;
  a.w_stride_h = pack.w_stride_h();
  a.w_stride_k = PackLayout::w_stride_k();
  a.w_scale_stride_h = pack.scale_stride_h(format);
  a.w_scale_stride_k = PackLayout::scale_stride_k(format);
  a.w_scale = format == WeightFormat::kBf16 ? nullptr : p.w_scale;
  a.out = p.out;
  a.out_stride_h = pitch;
  a.out_stride_m = static_cast<int64_t>(pack.heads) * pitch;
  a.q_scale = out == OutDtype::kE4m3 ? p.q_scale : nullptr;
  return a;
}

StagedTensors staged_tensors(const PackLayout& pack, const LayerWeights& w, const Activations& act, int layer, int m,
                             int pitch) {
  StagedTensors t;
  t.heads = pack.heads;
  t.nope = pack.nope;
  t.m = m;
  t.out_pitch = pitch;
  t.q = act.q();
  t.w = w.bf16(layer);
  t.w_stride_h = pack.w_stride_h();
  t.w_stride_k = PackLayout::w_stride_k();
  t.bmm_out = act.bmm_out();
  t.cat_out = act.staged_cat();
  t.out_e4m3 = act.staged_e4m3();
  t.f32_a = act.f32_a();
  t.f32_b = act.f32_b();
  t.q_scale = act.q_scale();
  return t;
}

}  // namespace spark_bench

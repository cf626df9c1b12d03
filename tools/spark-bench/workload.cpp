#include "tools/spark-bench/workload.h"

#include <fmt/format.h>

#include <algorithm>

#include "tools/spark-bench/device_ops.h"

namespace spark_bench {

const char* op_name(Op op) { return op == Op::kQproj ? "qproj" : "oproj"; }
const char* dim_name(Op op) { return op == Op::kQproj ? "K" : "V"; }

size_t Shape::in_elems(int m) const {
  return static_cast<size_t>(m) * heads * (op == Op::kQproj ? dim + kRope : kLatent);
}

size_t Shape::bmm_elems(int m) const {
  return static_cast<size_t>(heads) * m * (op == Op::kQproj ? kLatent : dim);
}

std::string out_pitch_problem(int pitch) {
  if (pitch >= kOutCols && pitch % kOutPitchMultiple == 0) return "";
  return fmt::format("{} is not an output row pitch: it must be >= {} (N + R) and a multiple of {} elements "
                     "(spark's rule for out strides; bf16 rows then start 16-byte aligned, e4m3 rows 8-byte "
                     "aligned)",
                     pitch, kOutCols, kOutPitchMultiple);
}

std::string out_pad_problem(int pad) {
  if (pad >= 0 && pad % kOutPitchMultiple == 0) return "";
  return fmt::format("{} is not an output row pad: it must be >= 0 and a multiple of {} elements (out_stride_m "
                     "= H*V + pad; spark's rule for out strides)",
                     pad, kOutPitchMultiple);
}

bool sector_aligned_pitch(int pitch, OutDtype out) {
  constexpr int kSectorBytes = 32;
  return (pitch * (out == OutDtype::kBf16 ? 2 : 1)) % kSectorBytes == 0;
}

int64_t block_rows_read(const PackLayout& pack) {
  int64_t count = 0, last = -1;  // the heads' row ranges ascend, so a shared block is the last one
  for (int h = 0; h < pack.heads; ++h) {
    const int64_t first_row = static_cast<int64_t>(h) * pack.rows_per_head + pack.first_row;
    const int64_t first = std::max(first_row / kBlock, last + 1);
    const int64_t end = (first_row + pack.used_rows - 1) / kBlock;
    if (end >= first) count += end - first + 1;
    last = std::max(last, end);
  }
  return count;
}

size_t weight_bytes_read(const PackLayout& pack, WeightFormat w) {
  const size_t hk = static_cast<size_t>(pack.heads) * pack.used_rows;
  switch (w) {
    case WeightFormat::kBf16: return hk * kLatent * 2;
    case WeightFormat::kMxfp8: return hk * kLatent + hk * kScalesPerRow;
    case WeightFormat::kFp8Block128:
      return hk * kLatent + static_cast<size_t>(block_rows_read(pack)) * kBlockScaleCols * sizeof(float);
  }
  return 0;
}

double floor_bytes(const Shape& s, int m, WeightFormat w, OutDtype out) {
  const double out_bytes = static_cast<double>(s.out_rows(m)) * s.out_cols() * (out == OutDtype::kBf16 ? 2 : 1);
  if (s.op == Op::kOproj)
    return static_cast<double>(weight_bytes_read(s.pack(), w)) + static_cast<double>(s.in_elems(m)) * 2 + out_bytes;
  const double mh = static_cast<double>(m) * s.heads;
  return static_cast<double>(weight_bytes_read(s.pack(), w)) + mh * s.dim * 2 + mh * kRope * 2 + out_bytes;
}

size_t activation_bytes(const Shape& s, int max_m, int max_pitch, bool any_e4m3, StagedQuant quant) {
  const size_t out = s.out_rows(max_m) * static_cast<size_t>(max_pitch);
  size_t b = s.in_elems(max_m) * 2;  // q or o
  b += out * 2;                      // spark out (bf16-sized)
  b += out * 2;                      // staged bf16 out / concat / transpose
  b += s.bmm_elems(max_m) * 2;       // bmm out
  if (any_e4m3) {
    b += out;  // staged e4m3 out
    if (quant == StagedQuant::kEager) b += 2 * s.out_rows(max_m) * static_cast<size_t>(s.out_cols()) * 4;  // fp32
  }
  return b;
}

LayerPlan plan_layers(const PackLayout& pack, WeightFormat format, size_t fixed_bytes, int requested,
                      size_t l2_bytes, size_t budget_bytes) {
  LayerPlan p;
  p.requested = requested;
  p.fixed_bytes = fixed_bytes;
  p.bytes_per_layer = pack.bf16_bytes();
  if (is_fp8(format)) p.bytes_per_layer += pack.e4m3_bytes() + pack.scale_bytes(format);
  // Both arms of a row use the same L; the smaller per-layer read (spark's FP8) decides.
  const size_t read = weight_bytes_read(pack, format);
  const size_t want_bytes = static_cast<size_t>(kL2Multiple) * l2_bytes;
  const int l2_layers = static_cast<int>((want_bytes + read - 1) / read);
  const int want = std::max(requested, l2_layers);
  const size_t cap = budget_bytes > fixed_bytes ? (budget_bytes - fixed_bytes) / p.bytes_per_layer : 0;
  p.layers = static_cast<int>(std::min<size_t>(static_cast<size_t>(want), cap));
  p.reduced_by_memory = p.layers < requested;
  p.l2_multiple_met = p.layers >= l2_layers;
  return p;
}

Activations::Activations(const Shape& shape, int max_m, int max_pitch, bool any_e4m3, StagedQuant quant,
                         uint64_t seed, cudaStream_t stream)
    : shape_(shape), max_pitch_(max_pitch) {
  const size_t out = shape.out_rows(max_m) * static_cast<size_t>(max_pitch);
  const size_t contiguous_out = shape.out_rows(max_m) * static_cast<size_t>(shape.out_cols());
  const size_t in_elems = shape.in_elems(max_m);
  in_.alloc(in_elems * 2);
  spark_out_.alloc(out * 2);
  staged_bf16_.alloc(out * 2);
  bmm_out_.alloc(shape.bmm_elems(max_m) * 2);
  if (any_e4m3) {
    staged_e4m3_.alloc(out);
    if (quant == StagedQuant::kEager) {
      f32_a_.alloc(contiguous_out * 4);
      f32_b_.alloc(contiguous_out * 4);
    }
  }
  out_scale_.alloc(sizeof(float));
  fill_bf16_random(in_.as<uint16_t>(), in_elems, seed, 1.0f, stream);
  const float scale = kQScale;
  BENCH_CUDA(cudaMemcpyAsync(out_scale_.get(), &scale, sizeof scale, cudaMemcpyHostToDevice, stream));
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

}  // namespace spark_bench

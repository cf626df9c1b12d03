// What spark-bench runs: the shapes, the bytes each call must move, how many layers a row
// cycles through, and the device buffers laid out as an inference server has them.  The query
// projection (--op qproj):
//
//   q        ONE token-major bf16 tensor [M, H, K+R]; q_nope = q (stride_h K+R, stride_m H*(K+R)),
//            q_pe = q + K (same strides)
//   weights  per layer, the first K rows of each head of a kv_b-like pack [H, K+256, 512]
//            (w_stride_h (K+256)*512, w_stride_k 512); MXFP8: e4m3 values pitched the same way
//            plus e8m0 scales [H, K+256, 16] (w_scale_stride_h (K+256)*16, w_scale_stride_k 16);
//            block FP8: e4m3 values pitched the same way plus the pack's fp32 block scales
//            [ceil(H*(K+256)/128), 4], one per 128 x 128 block (w_scale_stride_h K+256, the pack's
//            rows per head; w_scale_stride_k 4).  With K = 192 a head has 448 rows, so blocks
//            straddle heads, as in GLM's checkpoints.
//   out      [M, H, 576], a view of a [M, H, P] buffer: rows (m, h) P elements apart (out_stride_h
//            P, out_stride_m H*P), bf16 or e4m3.  P = 576 is contiguous; a padded P (584, 640)
//            is a server's pitched output buffer, whose pad columns spark must never write
//
// The value up-projection (--op oproj):
//
//   o        ONE token-major bf16 tensor [M, H, 512] (o_stride_m H*512, o_stride_h 512)
//   weights  per layer, the LAST V rows of each head of a kv_b-like pack [H*(128+V), 512]
//            (K = 128: w = pack + 128*512, w_stride_h (128+V)*512, w_stride_v 512); the FP8
//            formats' values and scales pitched as above (MXFP8 w_scale = scales + 128*16; block
//            FP8 w_scale = the pack's block scales, w_scale_stride_h 128+V, its rows per head)
//   out      [M, H*V], a view of a [M, P] buffer, P = H*V + --out-pad (out_stride_m P)
//
// Each layer has its own weights (so the L2 cannot hold them across a replay); the activations
// and the staged arm's scratch tensors are shared by all layers, as a server's caching
// allocator would hand the same activation buffers to every layer.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "ops/mla_qproj/key.h"
#include "spark/spark.h"
#include "tools/spark-bench/cuda_objects.h"
#include "tools/spark-bench/staged.h"

namespace spark_bench {

constexpr int kLatent = 512;                    // N (qproj), L (oproj)
constexpr int kRope = 64;                       // R
constexpr int kOutCols = kLatent + kRope;       // 576
// out's row pitch P must be a multiple of this many elements (spark's rule for out strides of
// either dtype: bf16 rows then start on 16-byte boundaries, e4m3 rows on 8-byte ones).
constexpr int kOutPitchMultiple = 8;
constexpr int kPackExtraRows = 256;             // qproj: rows per head of the pack past the K rows of W_UK
constexpr int kOprojNope = 128;                 // oproj: the pack's K rows per head before W_UV's V rows
constexpr int kScalesPerRow = kLatent / 32;     // MXFP8: 16 e8m0 bytes per pack row
constexpr int kBlock = 128;                     // block FP8: one fp32 scale per 128 x 128 block
constexpr int kBlockScaleCols = kLatent / kBlock;  // 4 scales per block row
constexpr float kWeightScale = 0.08f;           // bf16 weights ~ N(0, 0.08^2): outputs ~ N(0, ~1)
constexpr float kQScale = 0.0371f;              // the e4m3 output scale (not a power of two)
// The layers of a row must hold at least this many times the L2 in weights, so a replay finds
// none of its weights left in the L2 from the previous replay.
constexpr int kL2Multiple = 4;

// The formats as spark's keys hold them (their values are the C enums').
using spark::OutDtype;
using spark::to_string;
using spark::is_fp8;
using spark::WeightFormat;
inline spark_weight_format to_spark(WeightFormat f) { return static_cast<spark_weight_format>(f); }
inline spark_dtype to_spark(OutDtype d) { return static_cast<spark_dtype>(d); }

// The op a run measures: the query projection (spark_mla_qproj_*) or the value up-projection
// (spark_mla_oproj_*).
enum class Op { kQproj, kOproj };
const char* op_name(Op op);   // "qproj", "oproj"
const char* dim_name(Op op);  // the name of a shape's second dimension: "K" (qproj), "V" (oproj)

// The kv_b-like pack of one layer and the strides of the views spark and cuBLAS get: each head
// has rows_per_head rows of 512, of which the op reads used_rows starting at first_row.
struct PackLayout {
  int heads = 0;
  int rows_per_head = 0;
  int first_row = 0;  // qproj: 0 (W_UK, the first K rows); oproj: K (W_UV, the last V rows)
  int used_rows = 0;  // K or V

  static PackLayout qproj(int heads, int nope) { return {heads, nope + kPackExtraRows, 0, nope}; }
  static PackLayout oproj(int heads, int v) { return {heads, kOprojNope + v, kOprojNope, v}; }

  int64_t rows() const { return static_cast<int64_t>(heads) * rows_per_head; }
  int64_t w_stride_h() const { return static_cast<int64_t>(rows_per_head) * kLatent; }
  static constexpr int64_t w_stride_row() { return kLatent; }  // w_stride_k, w_stride_v
  int64_t w_offset() const { return static_cast<int64_t>(first_row) * kLatent; }  // elements to head 0's first row
  int64_t block_rows() const { return (rows() + kBlock - 1) / kBlock; }  // rows of block scales
  // w_scale's strides as the format defines them (bf16 gets MXFP8's: spark never reads them).
  int64_t scale_stride_h(WeightFormat f) const {
    if (f == WeightFormat::kFp8Block128) return rows_per_head;  // packed rows per head
    return static_cast<int64_t>(rows_per_head) * kScalesPerRow;
  }
  static int64_t scale_stride_row(WeightFormat f) {
    return f == WeightFormat::kFp8Block128 ? kBlockScaleCols : kScalesPerRow;
  }
  // Bytes from the scales of the pack to w_scale: MXFP8's scales are per row; block FP8's
  // w_scale is the base of the pack's block scales (the packed-row rule finds the rows).
  int64_t scale_offset_bytes(WeightFormat f) const {
    return f == WeightFormat::kMxfp8 ? static_cast<int64_t>(first_row) * kScalesPerRow : 0;
  }
  size_t bf16_bytes() const { return static_cast<size_t>(rows()) * kLatent * 2; }
  size_t e4m3_bytes() const { return static_cast<size_t>(rows()) * kLatent; }
  // The scales of one pack: e8m0 bytes for MXFP8, fp32 block scales for block FP8, none for bf16.
  size_t scale_bytes(WeightFormat f) const {
    if (f == WeightFormat::kMxfp8) return static_cast<size_t>(rows()) * kScalesPerRow;
    if (f == WeightFormat::kFp8Block128) return static_cast<size_t>(block_rows()) * kBlockScaleCols * sizeof(float);
    return 0;
  }
};

// One (op, H, K or V) of the grid and the sizes of its activations.  out is seen as rows of
// out_cols() elements, out_pitch apart: (m, h) rows of 576 for qproj, m rows of H*V for oproj.
struct Shape {
  Op op = Op::kQproj;
  int heads = 0;
  int dim = 0;  // qproj: K (nope_dim); oproj: V (v_head_dim)

  PackLayout pack() const { return op == Op::kQproj ? PackLayout::qproj(heads, dim) : PackLayout::oproj(heads, dim); }
  const char* dim_name() const { return spark_bench::dim_name(op); }
  size_t in_elems(int m) const;   // q [M, H, K+R] or o [M, H, L]
  size_t bmm_elems(int m) const;  // the staged bmm's output, [H, M, 512] or [H, M, V]
  size_t out_rows(int m) const { return op == Op::kQproj ? static_cast<size_t>(m) * heads : static_cast<size_t>(m); }
  int out_cols() const { return op == Op::kQproj ? kOutCols : heads * dim; }
};

// Block FP8: the block rows of the pack that the used rows of some head touch (each counted
// once), the block scales one call must read beside the values.
int64_t block_rows_read(const PackLayout& pack);

// Why `pitch` cannot be qproj out's row pitch ("" when it can): below 576, or not a multiple of 8.
std::string out_pitch_problem(int pitch);
// Why `pad` cannot be oproj out's row pad ("" when it can): negative, or not a multiple of 8.
std::string out_pad_problem(int pad);

// Whether rows `pitch` elements of `out` apart all start on a 32-byte DRAM sector boundary
// (576 and 640 do for both dtypes; 584 does for neither).
bool sector_aligned_pitch(int pitch, OutDtype out);

// Bytes one call must move at least (the floor): the weights it reads (only the used rows of
// each head) + q_nope + q_pe + out (qproj), or + o + out (oproj).
double floor_bytes(const Shape& s, int m, WeightFormat w, OutDtype out);

// Weight bytes one layer's call reads, per format (what must miss the L2).
size_t weight_bytes_read(const PackLayout& pack, WeightFormat w);

// Device bytes of the activations of one shape (see Activations).
size_t activation_bytes(const Shape& s, int max_m, int max_pitch, bool any_e4m3, StagedQuant quant);

// How many layers one (shape, format) group cycles through.
struct LayerPlan {
  int layers = 0;
  int requested = 0;
  bool reduced_by_memory = false;  // fewer than requested: the budget would be exceeded
  bool l2_multiple_met = true;     // layers * weight read >= kL2Multiple * L2
  size_t bytes_per_layer = 0;      // weight allocation per layer (packs, both formats for MXFP8)
  size_t fixed_bytes = 0;          // activations and workspace
  size_t total_bytes() const { return fixed_bytes + bytes_per_layer * static_cast<size_t>(layers); }
};
// requested: --layers; raised so the layers' weights are >= kL2Multiple x l2_bytes, then
// capped by budget_bytes.  layers == 0 when not even one layer fits.
LayerPlan plan_layers(const PackLayout& pack, WeightFormat format, size_t fixed_bytes, int requested,
                      size_t l2_bytes, size_t budget_bytes);

// The input (q or o), the outputs and the staged arm's scratch, sized for max_m, shared by
// every layer.  The outputs (spark's, the staged bf16 one and the staged e4m3 one) have rows
// max_pitch elements apart, so every pitch up to it fits; the staged arm's temporaries (bmm
// out, the concat or transpose before the e4m3 quant, the eager quant's fp32) are contiguous,
// as PyTorch makes them.
class Activations {
 public:
  Activations(const Shape& shape, int max_m, int max_pitch, bool any_e4m3, StagedQuant quant, uint64_t seed,
              cudaStream_t stream);

  const Shape& shape() const { return shape_; }
  int max_pitch() const { return max_pitch_; }
  const uint16_t* in() const { return in_.as<uint16_t>(); }  // q or o
  void* spark_out() const { return spark_out_.get(); }
  uint16_t* staged_bf16() const { return staged_bf16_.as<uint16_t>(); }  // concat / transpose out
  uint8_t* staged_e4m3() const { return staged_e4m3_.as<uint8_t>(); }
  uint16_t* bmm_out() const { return bmm_out_.as<uint16_t>(); }
  float* f32_a() const { return f32_a_.as<float>(); }
  float* f32_b() const { return f32_b_.as<float>(); }
  const float* out_scale() const { return out_scale_.as<float>(); }  // qproj's q_scale

 private:
  Shape shape_;
  int max_pitch_;
  DeviceBuffer in_, spark_out_, staged_bf16_, staged_e4m3_, bmm_out_, f32_a_, f32_b_, out_scale_;
};

// The distinct weights of L layers of one (pack, format), one allocation per tensor kind,
// layer l's pack (and its scales) at offset l * pack size.  For the FP8 formats, bf16 holds
// the dequantised weights the staged arm multiplies with (servers dequantise once at load and
// run the bf16 bmm).
class LayerWeights {
 public:
  LayerWeights(const PackLayout& pack, WeightFormat format, int layers, uint64_t seed, cudaStream_t stream);

  int layers() const { return layers_; }
  WeightFormat format() const { return format_; }
  const uint16_t* bf16(int layer) const;
  const uint8_t* e4m3(int layer) const;
  const void* scales(int layer) const;  // e8m0 bytes (MXFP8) or fp32 block scales

 private:
  PackLayout pack_;
  WeightFormat format_;
  int layers_;
  DeviceBuffer bf16_, e4m3_, scales_;
};

}  // namespace spark_bench

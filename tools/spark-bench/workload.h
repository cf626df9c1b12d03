// What spark-bench runs: the shapes, the bytes each call must move, how many layers a row
// cycles through, and the device buffers laid out as an inference server has them:
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
// Each layer has its own weights (so the L2 cannot hold them across a replay); q, out and the
// staged arm's scratch tensors are shared by all layers, as a server's caching allocator
// would hand the same activation buffers to every layer.
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

constexpr int kLatent = 512;                    // N
constexpr int kRope = 64;                       // R
constexpr int kOutCols = kLatent + kRope;       // 576
// out's row pitch P must be a multiple of this many elements (spark's rule for out strides of
// either dtype: bf16 rows then start on 16-byte boundaries, e4m3 rows on 8-byte ones).
constexpr int kOutPitchMultiple = 8;
constexpr int kPackExtraRows = 256;             // rows per head of the pack past the K rows of W_UK
constexpr int kScalesPerRow = kLatent / 32;     // MXFP8: 16 e8m0 bytes per K row
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

// The kv_b-like pack of one layer and the strides of the views spark and cuBLAS get.
struct PackLayout {
  int heads = 0, nope = 0;
  int64_t rows() const { return static_cast<int64_t>(heads) * (nope + kPackExtraRows); }
  int64_t w_stride_h() const { return static_cast<int64_t>(nope + kPackExtraRows) * kLatent; }
  static constexpr int64_t w_stride_k() { return kLatent; }
  int64_t block_rows() const { return (rows() + kBlock - 1) / kBlock; }  // rows of block scales
  // w_scale's strides as the format defines them (bf16 gets MXFP8's: spark never reads them).
  int64_t scale_stride_h(WeightFormat f) const {
    if (f == WeightFormat::kFp8Block128) return nope + kPackExtraRows;  // packed rows per head
    return static_cast<int64_t>(nope + kPackExtraRows) * kScalesPerRow;
  }
  static int64_t scale_stride_k(WeightFormat f) {
    return f == WeightFormat::kFp8Block128 ? kBlockScaleCols : kScalesPerRow;
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

// Block FP8: the block rows of the pack that the K rows of some head touch (each counted once),
// the block scales one call must read beside the values.
int64_t block_rows_read(int heads, int nope);

// Why `pitch` cannot be out's row pitch ("" when it can): below 576, or not a multiple of 8.
std::string out_pitch_problem(int pitch);

// Whether rows `pitch` elements of `out` apart all start on a 32-byte DRAM sector boundary
// (576 and 640 do for both dtypes; 584 does for neither).
bool sector_aligned_pitch(int pitch, OutDtype out);

// Bytes one call must move at least (the floor): the weights it reads (only the K rows of
// each head) + q_nope + q_pe + out.
double floor_bytes(int heads, int nope, int m, WeightFormat w, OutDtype out);

// Weight bytes one layer's call reads, per format (what must miss the L2).
size_t weight_bytes_read(int heads, int nope, WeightFormat w);

// Device bytes of the activations of one (H, K) (see Activations).
size_t activation_bytes(int heads, int nope, int max_m, int max_pitch, bool any_e4m3, StagedQuant quant);

// How many layers one (H, K, format) group cycles through.
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
LayerPlan plan_layers(int heads, int nope, WeightFormat format, size_t fixed_bytes, int requested,
                      size_t l2_bytes, size_t budget_bytes);

// q, the outputs and the staged arm's scratch, sized for max_m rows, shared by every layer.
// The outputs (spark's, the staged bf16 one and the staged e4m3 one) have rows max_pitch
// elements apart, so every pitch up to it fits; the staged arm's temporaries (bmm out, the
// concat before the e4m3 quant, the eager quant's fp32) are contiguous, as PyTorch makes them.
class Activations {
 public:
  Activations(int heads, int nope, int max_m, int max_pitch, bool any_e4m3, StagedQuant quant, uint64_t seed,
              cudaStream_t stream);

  int heads() const { return heads_; }
  int nope() const { return nope_; }
  int max_pitch() const { return max_pitch_; }
  const uint16_t* q() const { return q_.as<uint16_t>(); }
  void* spark_out() const { return spark_out_.get(); }
  uint16_t* staged_cat() const { return staged_cat_.as<uint16_t>(); }
  uint8_t* staged_e4m3() const { return staged_e4m3_.as<uint8_t>(); }
  uint16_t* bmm_out() const { return bmm_out_.as<uint16_t>(); }
  float* f32_a() const { return f32_a_.as<float>(); }
  float* f32_b() const { return f32_b_.as<float>(); }
  const float* q_scale() const { return q_scale_.as<float>(); }
  size_t spark_out_bytes() const { return spark_out_.bytes(); }
  size_t staged_out_bytes() const { return staged_cat_.bytes(); }
  size_t staged_e4m3_bytes() const { return staged_e4m3_.bytes(); }

 private:
  int heads_, nope_, max_pitch_;
  DeviceBuffer q_, spark_out_, staged_cat_, staged_e4m3_, bmm_out_, f32_a_, f32_b_, q_scale_;
};

// The distinct weights of L layers of one (H, K, format), one allocation per tensor kind,
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

// The device pointers of one layer's spark call.
struct CallPointers {
  const uint16_t* q = nullptr;   // [M, H, K+R]
  const void* w = nullptr;       // the layer's pack (bf16 or e4m3 values)
  const void* w_scale = nullptr; // its scales (FP8 formats)
  void* out = nullptr;           // rows out_pitch apart
  const float* q_scale = nullptr;
};
CallPointers call_pointers(const LayerWeights& w, const Activations& act, int layer);

// The spark call of one layer with out's rows `pitch` elements apart (q_scale only for e4m3
// output, w_scale only for FP8 weights, with the format's scale strides).
spark_mla_qproj_args spark_args(const PackLayout& pack, WeightFormat format, const CallPointers& p, int m,
                                OutDtype out, int pitch);

// The staged arm's tensors for one layer, its output rows `pitch` elements apart.
StagedTensors staged_tensors(const PackLayout& pack, const LayerWeights& w, const Activations& act, int layer, int m,
                             int pitch);

}  // namespace spark_bench

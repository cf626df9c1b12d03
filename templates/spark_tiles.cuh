// Device pieces that every op's kernel families share: the output and weight kinds, 16-byte
// async row copies into shared memory, the FP8 weight dequantisation, and the epilogue's
// staged output vectors.  Op-specific parameters stay in each op's own header.
#pragma once

#include "spark_device.cuh"

namespace spark {

// The output dtypes (their values are the C API's spark_dtype).
enum class OutKind { kBf16 = 0, kE4m3 = 1 };
// The weight formats (their values are the C API's spark_weight_format).
enum class WeightKind { kBf16 = 0, kMxfp8 = 1, kFp8Block128 = 2 };
__host__ __device__ constexpr bool is_fp8(WeightKind k) { return k != WeightKind::kBf16; }

__host__ __device__ constexpr int out_bytes(OutKind k) { return k == OutKind::kBf16 ? 2 : 1; }

// A if kFirst, else B: std::conditional, which the templates do without (they include no
// standard or CUDA headers, see spark_device.cuh).
template <bool kFirst, class A, class B>
struct SelectT {
  using type = A;
};
template <class A, class B>
struct SelectT<false, A, B> {
  using type = B;
};
template <bool kFirst, class A, class B>
using Select = typename SelectT<kFirst, A, B>::type;

// ---- Async copies ----------------------------------------------------------------------

// Rows 0 .. rows-1 of kVecs 16-byte vectors each, from src (src_stride bytes apart) to
// dst + dst_offset(row, vector), with 16-byte cp.async by threads tid = 0 .. kThreads-1;
// rows >= valid_rows are zero-filled without being read (their source is `fallback`).
// kStep = false takes the flat index loop even where threads could step whole rows.
template <int kVecs, int kThreads, bool kStep = true, class DstOffset>
__device__ __forceinline__ void copy_rows_async_to(u8* dst, DstOffset dst_offset, const u8* src,
                                                   long long src_stride, int rows, int valid_rows,
                                                   const void* fallback, int tid) {
  if constexpr (kStep && kThreads % kVecs == 0) {
    // A thread keeps one vector column and steps kRowStep rows at a time: its source
    // advances by a constant, with no division or 64-bit multiply per copy.  `rows` is a
    // constant at every call, so the passes unroll.
    constexpr int kRowStep = kThreads / kVecs;
    const int c = static_cast<unsigned>(tid) % kVecs, r0 = static_cast<unsigned>(tid) / kVecs;
    const u8* s = src + r0 * src_stride + c * 16;
    const long long step = kRowStep * src_stride;
    const int passes = (rows + kRowStep - 1) / kRowStep;
#pragma unroll
    for (int n = 0; n < passes; ++n, s += step) {
      const int r = r0 + n * kRowStep;
      if (r < rows) {
        const bool valid = r < valid_rows;
        cp_async_16(dst + dst_offset(r, c), valid ? s : fallback, valid ? 16 : 0);
      }
    }
  } else {
    for (int i = tid; i < rows * kVecs; i += kThreads) {
      const int r = i / kVecs, c = i % kVecs;
      const bool valid = r < valid_rows;
      cp_async_16(dst + dst_offset(r, c), valid ? src + r * src_stride + c * 16 : fallback, valid ? 16 : 0);
    }
  }
}

// ---- FP8 weights -------------------------------------------------------------------------

// Eight e4m3 weights (in memory order) -> eight bf16 (a 16-byte vector, same order), each
// RN_bf16(float(e4m3) * scale), the product rounded to float first.  MXFP8's product is
// exact in float (4 significant bits times a power of two), so its one rounding to bf16
// gives the MXFP8 rule's bits, subnormals included; block FP8's is the checkpoints' rule
// as written (fp32 product, then bf16).
__device__ __forceinline__ uint4 dequantise8(uint2 q, float s) {
  float lo[4], hi[4];
  e4m3x4_to_float(q.x, lo);
  e4m3x4_to_float(q.y, hi);
  uint4 r;
  r.x = pack_bf16x2(__fmul_rn(lo[0], s), __fmul_rn(lo[1], s));
  r.y = pack_bf16x2(__fmul_rn(lo[2], s), __fmul_rn(lo[3], s));
  r.z = pack_bf16x2(__fmul_rn(hi[0], s), __fmul_rn(hi[1], s));
  r.w = pack_bf16x2(__fmul_rn(hi[2], s), __fmul_rn(hi[3], s));
  return r;
}

// ---- Epilogue: outputs staged in shared memory, stored as whole row segments -------------

// Two adjacent accumulators (row r, columns c and c + 1) converted to the output type into
// staged output rows kLdC bytes apart.
template <int kLdC, OutKind kOut>
__device__ __forceinline__ void stage_pair(u8* Cs, int r, int c, float lo, float hi, float inv_scale) {
  const u32 v = pack_bf16x2(lo, hi);
  if (kOut == OutKind::kBf16) {
    *reinterpret_cast<u32*>(Cs + r * kLdC + c * 2) = v;
  } else {
    *reinterpret_cast<u16*>(Cs + r * kLdC + c) = bf16x2_to_e4m3x2(v, inv_scale);
  }
}

// One staged output vector of eight columns (16 bytes bf16; 8 e4m3, as e4m3 strides only
// promise 8-byte aligned rows) from src to dst.
template <OutKind kOut>
__device__ __forceinline__ void store_staged_vec(u8* dst, const u8* src) {
  if (kOut == OutKind::kBf16) {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  } else {
    *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
  }
}

// A warp's 16 x kCols accumulator fragment (a wgmma warp's share, or 16-row mma.sync
// tiles side by side: acc[4 jn .. 4 jn + 3] hold rows lane / 4 and + 8, columns
// 8 jn + 2 (lane % 4) and + 1) to the output as whole row segments, kStageCols columns at a
// time through the warp's staging buffer (16 rows kLdC bytes apart).  Row r is output row
// row0 + r, its column c at dst(row0 + r, c); rows from m_end on are not written.
template <int kCols, int kStageCols, int kLdC, OutKind kOut, class Dst>
__device__ __forceinline__ void store_warp_rows(const float (&acc)[kCols / 2], u8* stage, int row0, int m_end,
                                                Dst dst, int lane, float inv_scale) {
  constexpr int kOutBytes = out_bytes(kOut);
  constexpr int kBlocks = kStageCols / 8;  // 8-column blocks per pass, and vectors per row
  const int g = lane / 4, c2 = (lane % 4) * 2;
#pragma unroll
  for (int pass = 0; pass < kCols / kStageCols; ++pass) {
#pragma unroll
    for (int jj = 0; jj < kBlocks; ++jj) {
      const int jn = pass * kBlocks + jj;
#pragma unroll
      for (int half = 0; half < 2; ++half)
        stage_pair<kLdC, kOut>(stage, g + half * 8, jj * 8 + c2, acc[jn * 4 + 2 * half], acc[jn * 4 + 2 * half + 1],
                               inv_scale);
    }
    __syncwarp();
#pragma unroll
    for (int t = 0; t < 16 * kBlocks / 32; ++t) {
      const int idx = lane + t * 32, r = idx / kBlocks, v = idx % kBlocks;
      const int m = row0 + r;
      if (m < m_end) store_staged_vec<kOut>(dst(m, pass * kStageCols + v * 8), stage + r * kLdC + v * (8 * kOutBytes));
    }
    __syncwarp();
  }
}

}  // namespace spark

// The MLA value up-projection at decode (M <= 16) with FP8 weights dequantised before the
// wait on the previous kernel, so that past the wait a CTA only loads o, multiplies, sums and
// stores.  The tiled kernel's layout (templates/mla_oproj.cuh): a CTA owns BN columns of one
// head, its warps split them 32 each and L KSPLIT ways; lane (g, t) holds, per 32-wide L chunk
// c of its warp, the eight weights (row v0 + 8j + g, L positions l0 + 32c .. + 7) for j 0..3.
// Each warp copies its rows' FP8 weights (and each lane its scales) by cp.async into the
// lanes' piece order, then each lane turns its pieces into bf16: the first kRegChunks chunks
// into registers (the MMAs' A fragments), the rest into shared memory, expanded in place
// within the warp's own region.  The product is the tiled kernel's
// transposed one (out^T = W o^T; M <= 8 takes half the MMAs) with the same dequantisation.
#pragma once

#include "mla_oproj.cuh"

namespace spark {

template <class S>
struct MlaOprojPreConfig : S {
  using S::V, S::L, S::BN, S::KSPLIT, S::kRegChunks, S::kTriggerFirst, S::kOut, S::kWeights;
  static constexpr int TM = 1, BM = 16;
  static constexpr int kNWarps = BN / 32;
  static constexpr int kThreads = kNWarps * KSPLIT * 32;
  static constexpr int kLPerWarp = L / KSPLIT;
  static constexpr int kChunks = kLPerWarp / 32;
  static constexpr int kSmemChunks = kChunks - kRegChunks;
  static constexpr int kOutBytes = out_bytes(kOut);
  // A warp's bf16 chunks: piece (c, j) of lane i at ((4c + j) * 32 + i) * 16, its FP8 source
  // at kWarpFp8Offset + ((4c + j) * 32 + i) * 8 (the region's upper half).
  static constexpr int kWarpBytes = kSmemChunks * 4 * 32 * 16;
  static constexpr int kWarpFp8Offset = kWarpBytes / 2;
  static constexpr int kBf16Bytes = kNWarps * KSPLIT * kWarpBytes;
  // Each warp's register chunks, FP8, piece (c, j) of lane i at ((4c + j) * 32 + i) * 8; the
  // partial sums reuse the space once they are converted.
  static constexpr int kWarpStageBytes = kRegChunks * 4 * 32 * 8;
  static constexpr int kStageBytes = kNWarps * KSPLIT * kWarpStageBytes;
  static constexpr int kPartialBytes = KSPLIT * BM * BN * 4;
  // The scales a lane keeps per row: a word per four chunks (MXFP8's E8M0 bytes) or per
  // 128-wide block (block FP8's fp32), the same count.
  static constexpr int kScaleWords = kChunks / 4;
  static constexpr int kScaleBytes = 4 * kScaleWords * kThreads * 4;
  static constexpr int kSmemBytes =
      kBf16Bytes + (kStageBytes + kScaleBytes > kPartialBytes ? kStageBytes + kScaleBytes : kPartialBytes);
  static_assert(is_fp8(kWeights), "FP8 weights only");
  static_assert(BN % 32 == 0 && V % BN == 0, "whole 32-column warps; V in BN blocks");
  static_assert(L % (KSPLIT * 32) == 0 && kRegChunks >= 0 && kRegChunks <= kChunks, "whole chunks");
  static_assert(kChunks % 4 == 0, "a lane's L range in whole 128-wide blocks");
  static_assert(kThreads <= 512, "CTA size");
};

template <class C>
__device__ __forceinline__ void mla_oproj_pre(const MlaOprojParams& p) {
  extern __shared__ __align__(16) u8 smem[];
  if constexpr (C::kTriggerFirst) grid_dependents_launch();

  constexpr int kBlocksN = C::V / C::BN;
  const int nb = blockIdx.x % kBlocksN, h = blockIdx.x / kBlocksN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nw = warp % C::kNWarps, ks = warp / C::kNWarps;
  const int g = lane / 4, t = lane % 4;
  const int v0 = nb * C::BN + nw * 32;
  const int l0 = ks * C::kLPerWarp + 8 * t;

  u8* const wregion = smem + warp * C::kWarpBytes;
  u8* const stage = smem + C::kBf16Bytes;
  u8* const wstage = stage + warp * C::kWarpStageBytes;  // the warp's register chunks, FP8
  // The scales, copied with the register chunks: MXFP8's E8M0 bytes of the lane's chunks
  // (consecutive from group l0 / 32, a word per four chunks), block FP8's fp32 scale of each
  // 128-wide block of the lane's L range; word (j, k) of a warp's lane i at
  // ((j * kScaleWords + k) * 32 + i) * 4.
  u8* const wscales = stage + C::kStageBytes + warp * (4 * C::kScaleWords * 32 * 4);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int v = v0 + 8 * j + g;
#pragma unroll
    for (int k = 0; k < C::kScaleWords; ++k) {
      const void* src;
      if constexpr (C::kWeights == WeightKind::kMxfp8) {
        src = static_cast<const u8*>(p.w_scale) + h * p.w_scale_stride_h + v * p.w_scale_stride_v + l0 / 32 + 4 * k;
      } else {
        const long long packed = (h + 1) * p.w_scale_stride_h - C::V + v;
        src = static_cast<const float*>(p.w_scale) + (packed / 128) * p.w_scale_stride_v + l0 / 128 + k;
      }
      cp_async_4(wscales + ((j * C::kScaleWords + k) * 32 + lane) * 4, src);
    }
  }
  // The multiplier of chunk c's pieces of row j (the lane's own copy: no barrier).
  const auto scale = [&](int c, int j) {
    const u32 word = *reinterpret_cast<const u32*>(wscales + ((j * C::kScaleWords + c / 4) * 32 + lane) * 4);
    if constexpr (C::kWeights == WeightKind::kMxfp8) return e8m0_to_float(static_cast<u8>(word >> (8 * (c % 4))));
    else return __uint_as_float(word);
  };
  // The warp's weights (its 32 rows, its L range) by 16-byte copies that bypass L1, the
  // register chunks in one group, then the rest: vector m of a group's row r holds the pieces
  // of lanes 4 (r % 8) + t and + 1 (t = 2 (m % 2)) of the group's chunk m / 2 and row j = r / 8,
  // adjacent in the piece order, so each lands whole.  Lanes read pieces other lanes copied,
  // hence each wait is followed by __syncwarp.
  const u8* wsrc = static_cast<const u8*>(p.w) + h * p.w_stride_h + v0 * p.w_stride_v + ks * C::kLPerWarp;
#pragma unroll
  for (int part = 0; part < 2; ++part) {
    const int chunk0 = part == 0 ? 0 : C::kRegChunks, chunks = part == 0 ? C::kRegChunks : C::kSmemChunks;
    const int row_vecs = 2 * chunks;
#pragma unroll
    for (int i = 0; i < row_vecs; ++i) {
      const int q = lane + 32 * i, r = q / row_vecs, m = q % row_vecs;
      const int piece = (4 * (m / 2) + r / 8) * 32 + 4 * (r % 8) + 2 * (m % 2);
      u8* dst = part == 0 ? wstage + piece * 8 : wregion + C::kWarpFp8Offset + piece * 8;
      cp_async_16(dst, wsrc + r * p.w_stride_v + 32 * chunk0 + 16 * m, 16);
    }
    cp_async_commit();
  }

  // The register chunks, as soon as the warp's have landed.
  uint4 wr[C::kRegChunks > 0 ? C::kRegChunks : 1][4];
  cp_async_wait_group<1>();
  __syncwarp();
#pragma unroll
  for (int c = 0; c < C::kRegChunks; ++c)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      wr[c][j] = dequantise8(*reinterpret_cast<const uint2*>(wstage + ((4 * c + j) * 32 + lane) * 8), scale(c, j));
  // The shared-memory chunks, in place: chunk c's bf16 pieces end no later than chunk c + 1's
  // FP8 pieces begin, so reading a chunk whole, then writing it, never overwrites a piece not
  // yet read.
  cp_async_wait_group<0>();
  __syncwarp();
#pragma unroll
  for (int c = 0; c < C::kSmemChunks; ++c) {
    uint2 q[4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      q[j] = *reinterpret_cast<const uint2*>(wregion + C::kWarpFp8Offset + ((4 * c + j) * 32 + lane) * 8);
    __syncwarp();
#pragma unroll
    for (int j = 0; j < 4; ++j)
      *reinterpret_cast<uint4*>(wregion + ((4 * c + j) * 32 + lane) * 16) = dequantise8(q[j], scale(C::kRegChunks + c, j));
  }
  // Every thread is done with the staging area, which the partial sums take over.
  __syncthreads();

  grid_dependency_wait();
  if constexpr (!C::kTriggerFirst) grid_dependents_launch();

  const bool two_n = p.m > 8;
  const u16* o = static_cast<const u16*>(p.o) + h * p.o_stride_h + l0;
  float tacc[2][2][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) tacc[i][n][e] = 0.0f;
#pragma unroll
  for (int c = 0; c < C::kChunks; ++c) {
    uint4 b[4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      b[j] = c < C::kRegChunks ? wr[c < C::kRegChunks ? c : 0][j]
                               : *reinterpret_cast<const uint4*>(
                                     wregion + ((4 * (c - C::kRegChunks) + j) * 32 + lane) * 16);
    oproj_transposed_chunk(tacc, b, o, p, g, c, two_n);
  }
  float* partial = reinterpret_cast<float*>(stage);
  oproj_transposed_partials<C>(tacc, partial, ks, nw, g, t);
  oproj_sum_store<C>(partial, p, h, nb, 0);
}

}  // namespace spark

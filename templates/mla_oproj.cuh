// The MLA value up-projection, out[m, h*V + v] = sum_l o[m, h, l] * W_UV[h, l, v], on
// mma.sync (sm_80 and later).  Both operands run along L, their contiguous dimension, so
// every lane loads its fragments straight from global memory as 16-byte vectors (8 bf16
// or 8 e4m3 bytes along L) with no shared-memory staging: within each 32-wide L chunk,
// lane (g, t) = (lane / 4, lane % 4) holds L positions 8t..8t+7 of its rows, and the two
// k16 MMA steps of the chunk take positions 8t + 4s .. 8t + 4s + 3 as the fragment's k
// pairs (2t, 2t+1) and (2t+8, 2t+9).  A and B use the same order, so the sum over L is
// unchanged.  A CTA owns BN columns of one head and BM = 16 x TM rows; its KSPLIT warp rows
// split L and add their partial sums through shared memory.  The weights (and their
// scales) are requested before the wait on the previous kernel, the activations after.
// Block FP8 at decode swaps the operands (kTransposedMma): the weights are A, o is B.
#pragma once

#include "mla_oproj_params.h"
#include "spark_tiles.cuh"

namespace spark {

// The layout from the named choices S: V, L, BN (columns per CTA), KSPLIT (warps along
// L), TM (16-row M tiles per warp), kOut, kWeights.
template <class S>
struct MlaOprojConfig : S {
  using S::V, S::L, S::BN, S::KSPLIT, S::TM, S::kOut, S::kWeights;
  static constexpr bool kFp8 = kWeights != WeightKind::kBf16;
  static constexpr int BM = 16 * TM;
  static constexpr int kNWarps = BN / 32;  // warps across the columns, 32 each
  static constexpr int kThreads = kNWarps * KSPLIT * 32;
  static constexpr int kLPerWarp = L / KSPLIT;
  static constexpr int kChunks = kLPerWarp / 32;
  static constexpr int kOutBytes = out_bytes(kOut);
  // The partial sums of every warp row: KSPLIT x BM x BN floats.
  static constexpr int kPartialBytes = KSPLIT * BM * BN * 4;
  // At decode (one M tile a warp) FP8 weights wait in shared memory, not registers (BN x L
  // bytes): at 128 heads 56-60 registers a lane instead of 79-85, so four 256-thread CTAs fit
  // an SM rather than two (bench/NOTES.md v26).
  static constexpr bool kStagedW = kFp8 && TM == 1;
  // Block FP8 at decode multiplies transposed (out^T = W o^T, in mla_oproj below): ~10 % fewer
  // instructions and 0.92-1.04x the time on an H100; MXFP8 keeps o as the A operand, where the
  // same change measured 0.87-1.13x (bench/NOTES.md v29).  One kernel serves both outputs.
  static constexpr bool kTransposedMma = kStagedW && kWeights == WeightKind::kFp8Block128;
  static constexpr int kWeightBytes = kStagedW ? BN * L : 0;
  static constexpr int kSmemBytes = kPartialBytes + kWeightBytes;
  static_assert(BN % 32 == 0 && V % BN == 0, "whole 32-column warps; V in BN blocks");
  static_assert(L % (KSPLIT * 32) == 0, "L in whole 32-wide chunks per warp");
  static_assert(kLPerWarp <= 128 && 128 % kLPerWarp == 0, "a warp's L range in one 128-wide scale block");
  static_assert(kThreads <= 512 && TM >= 1 && TM <= 4, "CTA size, M tiles per warp");
};

// FP8: the multiplier of weight (h, v, l), MXFP8's E8M0 byte of its 32-wide L group or
// block FP8's fp32 scale of the 128 x 128 block that packed row (h + 1) * rows_per_head -
// V + v lies in.
template <WeightKind kWeights, int V>
__device__ __forceinline__ float oproj_scale(const MlaOprojParams& p, int h, int v, int l) {
  if constexpr (kWeights == WeightKind::kMxfp8) {
    return e8m0_to_float(static_cast<const u8*>(p.w_scale)[h * p.w_scale_stride_h + v * p.w_scale_stride_v + l / 32]);
  } else {
    const long long packed = (h + 1) * p.w_scale_stride_h - V + v;
    return static_cast<const float*>(p.w_scale)[(packed / 128) * p.w_scale_stride_v + l / 128];
  }
}

__device__ __forceinline__ u32 word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// One 32-wide L chunk of a warp's 16-row M tile: rows g and g + 8 of o (a_lo, a_hi: L
// positions 8t..8t+7) times the four 8-column weight fragments b (rows 8j + g, the same L
// positions), as two k16 MMA steps.
__device__ __forceinline__ void oproj_mma_chunk(float (&acc)[4][4], const uint4& a_lo, const uint4& a_hi,
                                                const uint4 (&b)[4]) {
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const u32 a[4] = {word_of(a_lo, 2 * s), word_of(a_hi, 2 * s), word_of(a_lo, 2 * s + 1), word_of(a_hi, 2 * s + 1)};
#pragma unroll
    for (int j = 0; j < 4; ++j) mma_bf16_16816(acc[j], a, word_of(b[j], 2 * s), word_of(b[j], 2 * s + 1));
  }
}

// One 32-wide L chunk of the transposed product out^T = W o^T: the dequantised weights b are
// the A fragments (16 rows: the lane's rows j = 2i and 2i + 1, in the same k order as o's
// words) and o's rows r0 and r0 + 8 (chunk c, as loaded) the B fragments, the second only
// when two_n, into tacc[i][n].
__device__ __forceinline__ void oproj_transposed_chunk(float (&tacc)[2][2][4], const uint4 (&b)[4], const u16* o,
                                                       const MlaOprojParams& p, int r0, int c, bool two_n) {
  const int r1 = r0 + 8;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  const uint4 a_lo = r0 < p.m ? *reinterpret_cast<const uint4*>(o + r0 * p.o_stride_m + 32 * c) : zero;
  const uint4 a_hi = r1 < p.m ? *reinterpret_cast<const uint4*>(o + r1 * p.o_stride_m + 32 * c) : zero;
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const u32 a[4] = {word_of(b[2 * i], 2 * s), word_of(b[2 * i + 1], 2 * s), word_of(b[2 * i], 2 * s + 1),
                        word_of(b[2 * i + 1], 2 * s + 1)};
      mma_bf16_16816(tacc[i][0], a, word_of(a_lo, 2 * s), word_of(a_lo, 2 * s + 1));
      if (two_n) mma_bf16_16816(tacc[i][1], a, word_of(a_hi, 2 * s), word_of(a_hi, 2 * s + 1));
    }
}

// The transposed product's sums into warp row ks's partial sums (BM x BN floats): tacc[i][n]
// holds output columns nw * 32 + 16i + g (+8 for e >= 2) of M rows 8n + 2t (+1 for odd e).
template <class C>
__device__ __forceinline__ void oproj_transposed_partials(const float (&tacc)[2][2][4], float* partial, int ks, int nw,
                                                          int g, int t) {
  float* mine = partial + ks * (C::BM * C::BN);
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        mine[(8 * n + 2 * t + (e & 1)) * C::BN + nw * 32 + 16 * i + g + 8 * (e >> 1)] = tacc[i][n][e];
}

// The CTA's BM x BN output tile (rows m0.., columns nb * BN.. of head h) from its warps'
// partial sums: each warp row's sums into shared memory (row 16i + g (+8), column nw * 32 +
// 8j + 2t), one barrier, then 8 columns per thread and vector added in warp-row order and
// stored as bf16 (16 bytes) or e4m3 (8 bytes, divided by *p.out_scale).  The caller keeps
// `partial` untouched until every thread has passed a later barrier.
template <class C>
__device__ __forceinline__ void oproj_sum_store(const float* partial, const MlaOprojParams& p, int h, int nb, int m0);

template <class C>
__device__ __forceinline__ void oproj_reduce_store(const float (&acc)[C::TM][4][4], float* partial,
                                                   const MlaOprojParams& p, int h, int nb, int m0) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nw = warp % C::kNWarps, ks = warp / C::kNWarps;
  const int g = lane / 4, t = lane % 4;
  float* mine = partial + ks * (C::BM * C::BN);
#pragma unroll
  for (int i = 0; i < C::TM; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = 16 * i + g + 8 * half, col = nw * 32 + 8 * j + 2 * t;
        *reinterpret_cast<float2*>(mine + r * C::BN + col) = make_float2(acc[i][j][2 * half], acc[i][j][2 * half + 1]);
      }
  oproj_sum_store<C>(partial, p, h, nb, m0);
}

// The second half of oproj_reduce_store: after every warp row's partial sums are in
// `partial` (BM x BN floats per warp row), one barrier, then the vector sums and stores.
template <class C>
__device__ __forceinline__ void oproj_sum_store(const float* partial, const MlaOprojParams& p, int h, int nb, int m0) {
  __syncthreads();

  float inv_scale = 1.0f;
  if constexpr (C::kOut == OutKind::kE4m3) inv_scale = rcp_rn(*p.out_scale);
  constexpr int kVecs = C::BN / 8;
  for (int idx = threadIdx.x; idx < C::BM * kVecs; idx += C::kThreads) {
    const int r = idx / kVecs, vec = idx % kVecs;
    const int m = m0 + r;
    if (m >= p.m) continue;
    float sum[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) sum[e] = 0.0f;
#pragma unroll
    for (int k = 0; k < C::KSPLIT; ++k) {
      const float* src = partial + k * (C::BM * C::BN) + r * C::BN + vec * 8;
      const float4 x = *reinterpret_cast<const float4*>(src), y = *reinterpret_cast<const float4*>(src + 4);
      sum[0] += x.x, sum[1] += x.y, sum[2] += x.z, sum[3] += x.w;
      sum[4] += y.x, sum[5] += y.y, sum[6] += y.z, sum[7] += y.w;
    }
    const u32 w0 = pack_bf16x2(sum[0], sum[1]), w1 = pack_bf16x2(sum[2], sum[3]);
    const u32 w2 = pack_bf16x2(sum[4], sum[5]), w3 = pack_bf16x2(sum[6], sum[7]);
    const long long col = static_cast<long long>(h) * C::V + nb * C::BN + vec * 8;
    u8* dst = static_cast<u8*>(p.out) + (m * p.out_stride_m + col) * C::kOutBytes;
    if constexpr (C::kOut == OutKind::kBf16) {
      *reinterpret_cast<uint4*>(dst) = make_uint4(w0, w1, w2, w3);
    } else {
      const u32 lo = u32(bf16x2_to_e4m3x2(w0, inv_scale)) | (u32(bf16x2_to_e4m3x2(w1, inv_scale)) << 16);
      const u32 hi = u32(bf16x2_to_e4m3x2(w2, inv_scale)) | (u32(bf16x2_to_e4m3x2(w3, inv_scale)) << 16);
      *reinterpret_cast<uint2*>(dst) = make_uint2(lo, hi);
    }
  }
}

template <class C>
__device__ __forceinline__ void mla_oproj(const MlaOprojParams& p) {
  extern __shared__ __align__(16) u8 smem[];

  constexpr int kBlocksN = C::V / C::BN;
  const int tiles_m = (p.m + C::BM - 1) / C::BM;
  const int tile_m = blockIdx.x % tiles_m;
  const int nb = blockIdx.x / tiles_m % kBlocksN;
  const int h = blockIdx.x / tiles_m / kBlocksN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nw = warp % C::kNWarps, ks = warp / C::kNWarps;
  const int g = lane / 4, t = lane % 4;
  const int v0 = nb * C::BN + nw * 32;  // the warp's first column
  const int l0 = ks * C::kLPerWarp + 8 * t;  // the lane's first L position

  // Weights: rows v0 + 8j + g, chunk c at L position l0 + 32c.  They do not depend on the
  // previous kernel, so they are requested before waiting for it: into registers, or at
  // decode FP8 by cp.async into the thread's own 8-byte slots (piece (c, j) of thread i at
  // ((4c + j) * kThreads + i) * 8: a warp reads 256 contiguous bytes, and each thread reads
  // only what it copied, so no barrier) with its scales a word a row (MXFP8: the E8M0
  // bytes of a lane's chunks are consecutive, group ks * kChunks + c; block FP8: a lane's L
  // range lies in one 128-wide block).
  using WVec = Select<C::kFp8, uint2, uint4>;  // a lane's eight weights of a row and chunk
  WVec wv[C::kStagedW ? 1 : C::kChunks][4];
  float scale[C::kStagedW ? 1 : C::kChunks][4];
  u8* const wslot = smem + C::kPartialBytes + threadIdx.x * 8;
  using ScaleWord = Select<C::kChunks == 4, u32, Select<C::kChunks == 2, u16, u8>>;
  ScaleWord mx_scale[4];
  float blk_scale[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int v = v0 + 8 * j + g;
    const long long row = h * p.w_stride_h + v * p.w_stride_v + l0;
    if constexpr (C::kStagedW) {
      if constexpr (C::kWeights == WeightKind::kMxfp8) {
        mx_scale[j] = *reinterpret_cast<const ScaleWord*>(static_cast<const u8*>(p.w_scale) +
                                                          h * p.w_scale_stride_h + v * p.w_scale_stride_v + l0 / 32);
      } else {
        blk_scale[j] = oproj_scale<C::kWeights, C::V>(p, h, v, l0);
      }
    }
#pragma unroll
    for (int c = 0; c < C::kChunks; ++c) {
      if constexpr (C::kStagedW) {
        cp_async_8(wslot + (4 * c + j) * C::kThreads * 8, static_cast<const u8*>(p.w) + row + 32 * c);
      } else if constexpr (C::kFp8) {
        wv[c][j] = *reinterpret_cast<const uint2*>(static_cast<const u8*>(p.w) + row + 32 * c);
        scale[c][j] = oproj_scale<C::kWeights, C::V>(p, h, v, l0 + 32 * c);
      } else {
        wv[c][j] = *reinterpret_cast<const uint4*>(static_cast<const u16*>(p.w) + row + 32 * c);
      }
    }
  }
  if constexpr (C::kStagedW) cp_async_commit();
  grid_dependency_wait();
  grid_dependents_launch();

  float acc[C::TM][4][4];
#pragma unroll
  for (int i = 0; i < C::TM; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  const int m0 = tile_m * C::BM;
  const u16* o = static_cast<const u16*>(p.o) + h * p.o_stride_h + l0;
  if constexpr (C::kTransposedMma) {
    // The transposed product (oproj_transposed_chunk): no register moves assemble o's
    // fragments, and M <= 8 takes half the MMAs.
    cp_async_wait_all();
    const bool two_n = p.m - m0 > 8;
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
      for (int j = 0; j < 4; ++j) {
        b[j] = dequantise8(*reinterpret_cast<const uint2*>(wslot + (4 * c + j) * C::kThreads * 8), blk_scale[j]);
      }
      oproj_transposed_chunk(tacc, b, o, p, m0 + g, c, two_n);
    }
    oproj_transposed_partials<C>(tacc, reinterpret_cast<float*>(smem), ks, nw, g, t);
    oproj_sum_store<C>(reinterpret_cast<const float*>(smem), p, h, nb, m0);
    return;
  }
  if constexpr (C::kStagedW) cp_async_wait_all();
#pragma unroll
  for (int c = 0; c < C::kChunks; ++c) {
    uint4 b[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if constexpr (C::kStagedW) {
        const uint2 q = *reinterpret_cast<const uint2*>(wslot + (4 * c + j) * C::kThreads * 8);
        const float s = C::kWeights == WeightKind::kMxfp8 ? e8m0_to_float(static_cast<u8>(mx_scale[j] >> (8 * c)))
                                                          : blk_scale[j];
        b[j] = dequantise8(q, s);
      } else if constexpr (C::kFp8) {
        b[j] = dequantise8(wv[c][j], scale[c][j]);
      } else {
        b[j] = wv[c][j];
      }
    }
#pragma unroll
    for (int i = 0; i < C::TM; ++i) {
      const int r0 = m0 + 16 * i + g, r1 = r0 + 8;
      const uint4 zero = make_uint4(0, 0, 0, 0);
      const uint4 a_lo = r0 < p.m ? *reinterpret_cast<const uint4*>(o + r0 * p.o_stride_m + 32 * c) : zero;
      const uint4 a_hi = r1 < p.m ? *reinterpret_cast<const uint4*>(o + r1 * p.o_stride_m + 32 * c) : zero;
      oproj_mma_chunk(acc[i], a_lo, a_hi, b);
    }
  }

  oproj_reduce_store<C>(acc, reinterpret_cast<float*>(smem), p, h, nb, m0);
}

}  // namespace spark

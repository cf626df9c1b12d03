// The value up-projection at decode (M <= 16 x TM) as a persistent ring: fewer, smaller CTAs
// that leave room on every SM for the next kernel's.  The tiled decode kernel holds a
// layer's weights in registers, so at many heads its CTAs fill every SM and the next
// layer's CTAs cannot become resident, and so cannot request their weights, until this
// layer's exit.  Here the grid is at most half the CTAs the device holds (the host launches
// resident / 2, and the shared memory is sized so that exactly two fit on an SM), each CTA
// walks a contiguous range of units (head, BN columns) and streams their weights through a
// ring of kStages shared-memory slots by cp.async; the next layer's CTAs sit beside it and
// fetch their first units while this one finishes.
//
// A unit's arithmetic is the tiled kernel's (mla_oproj.cuh): warps split BN / 32 ways
// across the columns and KSPLIT ways along L, lane (g, t) takes L positions 8t..8t+7 of each
// 32-wide chunk, and the warp rows' partial sums meet in shared memory.  The o fragments of
// a head stay in registers across its units; the next head's are loaded a unit ahead.  A
// slot holds BN weight rows of L elements, each row's 16-byte vectors XOR-swizzled by its
// low row bits so that one fragment load (eight rows, one run of each) takes the fewest
// shared-memory wavefronts; FP8 slots also hold each row's L / 32 bytes of scales (E8M0
// bytes, or L / 128 fp32 words of block FP8), dequantised per fragment as the tiled kernel
// does.  The first kStages - 1 units' weights are requested before the wait on the previous
// kernel, the activations after.
#pragma once

#include "mla_oproj.cuh"

namespace spark {

// The layout from the named choices S: V, L, BN, KSPLIT, kStages, TM (16-row M tiles: the
// unit's rows are 16 x TM), kSmemFloor (the shared memory below which a third CTA would fit
// on an SM), kOut, kWeights.
template <class S>
struct MlaOprojRingConfig : S {
  using S::V, S::L, S::BN, S::KSPLIT, S::kStages, S::TM, S::kOut, S::kWeights;
  static constexpr bool kFp8 = kWeights != WeightKind::kBf16;
  static constexpr int BM = 16 * TM;
  static constexpr int kNWarps = BN / 32;
  static constexpr int kThreads = kNWarps * KSPLIT * 32;
  static constexpr int kLPerWarp = L / KSPLIT;
  static constexpr int kChunks = kLPerWarp / 32;
  static constexpr int kOutBytes = out_bytes(kOut);
  static constexpr int kRowBytes = kFp8 ? L : 2 * L;  // a weight row in a slot
  static constexpr int kRowVecs = kRowBytes / 16;
  static constexpr int kSlotBytes = BN * kRowBytes;
  static constexpr int kScaleRowBytes = kFp8 ? L / 32 : 0;  // L / 32 E8M0 bytes or L / 128 floats
  static constexpr int kOffScales = kStages * kSlotBytes;
  static constexpr int kOffPartial = kOffScales + kStages * BN * kScaleRowBytes;
  static constexpr int kUsedBytes = kOffPartial + KSPLIT * BM * BN * 4;
  static constexpr int kSmemBytes = kUsedBytes > S::kSmemFloor ? kUsedBytes : S::kSmemFloor;
  static_assert(BN % 32 == 0 && V % BN == 0, "whole 32-column warps; V in BN blocks");
  static_assert(L % (KSPLIT * 32) == 0 && L % 128 == 0, "L in whole 32-wide chunks per warp and 128-wide blocks");
  static_assert(kStages >= 2 && kStages <= 4, "the ring's slots");
  static_assert(TM == 1 || TM == 2, "one or two 16-row M tiles");
  static_assert(kRowVecs >= 8, "the swizzle permutes the vectors of a 128-byte window");
};

// The XOR of a weight row's 16-byte vector index.  A fragment load reads eight rows (g), a
// 64-byte run of each (bf16; 32 bytes FP8); rows 1024 (512) bytes apart share banks, so
// rows of odd g take the other half of the 128-byte window (FP8: the four row residues its
// four quarters).
template <bool kFp8>
__device__ __forceinline__ int ring_swizzle(int row) {
  return kFp8 ? (row & 3) << 1 : (row & 1) << 2;
}

// Unit u's weights (and FP8 scales) into ring slot `slot`: one cp.async group's worth of
// copies (the caller commits).
template <class C>
__device__ __forceinline__ void ring_copy_unit(const MlaOprojParams& p, u8* smem, int u, int slot) {
  constexpr int kBlocksN = C::V / C::BN;
  const int h = u / kBlocksN, n0 = u % kBlocksN * C::BN;
  constexpr int kBytes = C::kFp8 ? 1 : 2;
  copy_rows_async_to<C::kRowVecs, C::kThreads>(
      smem + slot * C::kSlotBytes, [](int r, int c) { return r * C::kRowBytes + (c ^ ring_swizzle<C::kFp8>(r)) * 16; },
      static_cast<const u8*>(p.w) + (h * p.w_stride_h + n0 * p.w_stride_v) * kBytes, p.w_stride_v * kBytes, C::BN,
      C::BN, p.w, threadIdx.x);
  if constexpr (C::kFp8) {
    // A row's scales, L / 128 four-byte words: MXFP8's bytes (h, v, 0..L/32) or block
    // FP8's floats of packed row (h + 1) * rows_per_head - V + v.
    constexpr int kWords = C::L / 128;
    u8* scales = smem + C::kOffScales + slot * C::BN * C::kScaleRowBytes;
    for (int idx = threadIdx.x; idx < C::BN * kWords; idx += C::kThreads) {
      const int r = idx / kWords, q = idx % kWords, v = n0 + r;
      const u8* from;
      if constexpr (C::kWeights == WeightKind::kMxfp8) {
        from = static_cast<const u8*>(p.w_scale) + h * p.w_scale_stride_h + v * p.w_scale_stride_v + 4 * q;
      } else {
        const long long packed = (h + 1) * p.w_scale_stride_h - C::V + v;
        const float* word = static_cast<const float*>(p.w_scale) + (packed / 128) * p.w_scale_stride_v + q;
        from = reinterpret_cast<const u8*>(word);
      }
      cp_async_4(scales + r * C::kScaleRowBytes + 4 * q, from);
    }
  }
}

// The lane's o fragments of head h: rows 16i + g and 16i + g + 8 of each M tile i (zero past
// M), L positions l0 + 32c.
template <class C>
__device__ __forceinline__ void ring_load_o(uint4 (&a)[C::kChunks][C::TM][2], const MlaOprojParams& p, int h, int l0,
                                            int g) {
  const u16* o = static_cast<const u16*>(p.o) + h * p.o_stride_h + l0;
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int c = 0; c < C::kChunks; ++c)
#pragma unroll
    for (int i = 0; i < C::TM; ++i)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = 16 * i + 8 * half + g;
        a[c][i][half] = r < p.m ? *reinterpret_cast<const uint4*>(o + r * p.o_stride_m + 32 * c) : zero;
      }
}

template <class C>
__device__ __forceinline__ void mla_oproj_ring(const MlaOprojParams& p) {
  extern __shared__ __align__(16) u8 smem[];

  constexpr int kBlocksN = C::V / C::BN;
  const int units = p.heads * kBlocksN;
  const int first = static_cast<int>(static_cast<long long>(blockIdx.x) * units / gridDim.x);
  const int count = static_cast<int>(static_cast<long long>(blockIdx.x + 1) * units / gridDim.x) - first;
  if (count <= 0) return;

  // Slot i % kStages holds unit first + i; one commit group per unit (empty past the
  // last), so every step waits for the same count.
#pragma unroll
  for (int i = 0; i < C::kStages - 1; ++i) {
    if (i < count) ring_copy_unit<C>(p, smem, first + i, i);
    cp_async_commit();
  }
  grid_dependency_wait();
  grid_dependents_launch();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nw = warp % C::kNWarps, ks = warp / C::kNWarps;
  const int g = lane / 4, t = lane % 4;
  const int l0 = ks * C::kLPerWarp + 8 * t;  // the lane's first L position
  float* partial = reinterpret_cast<float*>(smem + C::kOffPartial);

  uint4 a[C::kChunks][C::TM][2], a_next[C::kChunks][C::TM][2];
  ring_load_o<C>(a, p, first / kBlocksN, l0, g);

  for (int j = 0; j < count; ++j) {
    // Unit j has landed for every thread, and every thread is past unit j - 1 (its slot's
    // reads and its partial sums), so that slot takes unit j + kStages - 1.
    cp_async_wait_group<C::kStages - 2>();
    __syncthreads();
    const int ahead = j + C::kStages - 1;
    if (ahead < count) ring_copy_unit<C>(p, smem, first + ahead, ahead % C::kStages);
    cp_async_commit();

    const int u = first + j, h = u / kBlocksN, nb = u % kBlocksN;
    const bool next_head = j + 1 < count && (u + 1) / kBlocksN != h;
    if (next_head) ring_load_o<C>(a_next, p, h + 1, l0, g);

    const u8* slot = smem + j % C::kStages * C::kSlotBytes;
    const u8* scales = smem + C::kOffScales + j % C::kStages * C::BN * C::kScaleRowBytes;
    float acc[C::TM][4][4];
#pragma unroll
    for (int i = 0; i < C::TM; ++i)
#pragma unroll
      for (int jj = 0; jj < 4; ++jj)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][jj][e] = 0.0f;
#pragma unroll
    for (int c = 0; c < C::kChunks; ++c) {
      const int l = l0 + 32 * c;
      uint4 b[4];
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        const int r = nw * 32 + 8 * jj + g;
        const u8* row = slot + r * C::kRowBytes;
        if constexpr (C::kFp8) {
          // A byte per weight: vector l / 16, its first or second half.
          const uint2 q = *reinterpret_cast<const uint2*>(row + (((l >> 4) ^ ring_swizzle<true>(r)) << 4) + (l & 15));
          const u8* srow = scales + r * C::kScaleRowBytes;
          const float s = C::kWeights == WeightKind::kMxfp8 ? e8m0_to_float(srow[l / 32])
                                                            : reinterpret_cast<const float*>(srow)[l / 128];
          b[jj] = dequantise8(q, s);
        } else {
          b[jj] = *reinterpret_cast<const uint4*>(row + ((l / 8) ^ ring_swizzle<false>(r)) * 16);
        }
      }
#pragma unroll
      for (int i = 0; i < C::TM; ++i) oproj_mma_chunk(acc[i], a[c][i][0], a[c][i][1], b);
    }
    oproj_reduce_store<C>(acc, partial, p, h, nb, 0);

    if (next_head) {
#pragma unroll
      for (int c = 0; c < C::kChunks; ++c)
#pragma unroll
        for (int i = 0; i < C::TM; ++i) a[c][i][0] = a_next[c][i][0], a[c][i][1] = a_next[c][i][1];
    }
  }
  cp_async_wait_all();  // only empty groups are left; drained so that none outlives the CTA
}

}  // namespace spark

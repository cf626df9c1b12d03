// What the three kernel families of the MLA query projection share (mla_qproj.cuh per
// tile, mla_qproj_ws.cuh weight-stationary, mla_qproj_wg.cuh weight-stationary on wgmma),
// beyond spark_tiles.cuh: the parameters, the copies of q and weight rows, the FP8
// dequantisation of weight tiles, the mma.sync warp tiles, the epilogue that stores staged
// outputs as bf16 or e4m3, the RoPE columns, and the programmatic-dependent-launch prologue.
// A family is a config (its named choices and the layout they imply) plus a driver.
#pragma once

#include "mla_qproj_params.h"
#include "spark_tiles.cuh"

namespace spark {

// The parameters' untyped tensor pointers as the element types the kernels read.
__device__ __forceinline__ const u16* q_nope_of(const MlaQprojParams& p) { return static_cast<const u16*>(p.q_nope); }
__device__ __forceinline__ const u16* q_pe_of(const MlaQprojParams& p) { return static_cast<const u16*>(p.q_pe); }
__device__ __forceinline__ const u8* w_scale_of(const MlaQprojParams& p) { return static_cast<const u8*>(p.w_scale); }

// The multiplier of 32-column group `group` (0..3) of a scale word: 2^(byte - 127) for
// MXFP8, the block's fp32 scale (whatever the group) for block FP8.
template <WeightKind kWeights>
__device__ __forceinline__ float scale_of_word(u32 word, int group) {
  if constexpr (kWeights == WeightKind::kFp8Block128) return bits_float(word);
  return e8m0_to_float(u8((word >> (8 * group)) & 0xffu));
}

// Programmatic dependent launch at a kernel's start.  The weights do not depend on the
// previous kernel, so `request_weights` issues their copies before waiting for it.  Then
// the next kernel may start: its CTAs request their weights while this one runs, and wait
// for it to finish before reading what it writes.
template <class RequestWeights>
__device__ __forceinline__ void pdl_start(RequestWeights request_weights) {
  request_weights();
  grid_dependency_wait();
  grid_dependents_launch();
}

// Byte offsets of 16-byte chunks in shared-memory bf16 tiles (B operands of the MMAs).
// Row-major with kLd elements per row:
template <int kLd>
struct RowMajorBf16 {
  static constexpr int kRowBytes = kLd * 2;
  __device__ __forceinline__ int operator()(int row, int chunk) const { return row * kLd * 2 + chunk * 16; }
};
// BN elements per row, chunk c of row r stored at chunk c ^ (r % 8) (BN >= 64): the eight
// rows of an ldmatrix land in eight different bank groups without padding.
template <int BN>
struct SwizzledBf16 {
  static_assert(BN % 64 == 0, "a swizzled row holds at least eight 16-byte chunks");
  static constexpr int kRowBytes = BN * 2;
  __device__ __forceinline__ int operator()(int row, int chunk) const {
    return row * kRowBytes + ((chunk ^ (row % 8)) * 16);
  }
};

// ---- Async copies ----------------------------------------------------------------------

// The same into rows kLd bytes apart, by all kThreads threads of the CTA.
template <int kVecs, int kLd, int kThreads>
__device__ __forceinline__ void copy_rows_async(u8* dst, const u8* src, long long src_stride, int rows,
                                                int valid_rows, const void* fallback) {
  copy_rows_async_to<kVecs, kThreads>(
      dst, [](int r, int c) { return r * kLd + c * 16; }, src, src_stride, rows, valid_rows, fallback,
      threadIdx.x);
}

// BM q_nope rows of head h from row m0 (kLdA elements apart); rows >= M are zero-filled.
template <int BM, int K, int kLdA, int kThreads>
__device__ __forceinline__ void load_q_rows(const MlaQprojParams& p, u16* As, int h, int m0) {
  const u16* src = q_nope_of(p) + h * p.q_nope_stride_h + m0 * p.q_nope_stride_m;
  copy_rows_async<K * 2 / 16, kLdA * 2, kThreads>(reinterpret_cast<u8*>(As), reinterpret_cast<const u8*>(src),
                                                  p.q_nope_stride_m * 2, BM, p.m - m0, p.q_nope);
}

// ---- Weights -----------------------------------------------------------------------------

// FP8: per K row in [k_begin, k_end) of head h, the kScaleWords scale words that start with
// the 128 columns holding n0, into scale_words (indexed by row).  MXFP8: the row's own
// bytes.  Block FP8: the fp32 scale of the block holding packed row h * w_scale_stride_h + k
// (w_scale_stride_h is the pack's rows per head, w_scale_stride_k the scale rows' stride in
// floats), so rows of one block fetch the same word, which the L1 serves.
template <WeightKind kWeights, int kScaleWords, int kThreads>
__device__ __forceinline__ void load_scale_words(const MlaQprojParams& p, u32* scale_words, int h, int n0,
                                                 int k_begin, int k_end) {
  for (int i = threadIdx.x; i < (k_end - k_begin) * kScaleWords; i += kThreads) {
    const int k = k_begin + i / kScaleWords, w = i % kScaleWords;
    const u8* src;
    if constexpr (kWeights == WeightKind::kFp8Block128) {
      const long long row = h * p.w_scale_stride_h + k;
      src = w_scale_of(p) + ((row / 128) * p.w_scale_stride_k + n0 / 128 + w) * 4;
    } else {
      src = w_scale_of(p) + h * p.w_scale_stride_h + k * p.w_scale_stride_k + (n0 / 128 + w) * 4;
    }
    cp_async_4(scale_words + k * kScaleWords + w, src);
  }
}

// Weight rows [k_begin, k_end) of head h, columns n0 .. n0+BN-1: bf16 to
// Bs + b_offset(k, chunk) (16-byte chunks), or FP8 raw bytes into the rows of the same
// index of raw (kLdRaw bytes per row) and, unless with_scales is false, the rows' scale
// words (load_scale_words).
template <int BN, int kLdRaw, int kScaleWords, WeightKind kWeights, int kThreads, bool kStep = true,
          class BOffset>
__device__ __forceinline__ void load_weight_rows(const MlaQprojParams& p, u8* Bs, BOffset b_offset, u8* raw,
                                                 u32* scale_words, int h, int n0, int k_begin, int k_end,
                                                 bool with_scales = true) {
  const int rows = k_end - k_begin;
  if constexpr (is_fp8(kWeights)) {
    const u8* wh = static_cast<const u8*>(p.w) + h * p.w_stride_h + k_begin * p.w_stride_k + n0;
    copy_rows_async<BN / 16, kLdRaw, kThreads>(raw + k_begin * kLdRaw, wh, p.w_stride_k, rows, rows, p.w);
    if (with_scales) load_scale_words<kWeights, kScaleWords, kThreads>(p, scale_words, h, n0, k_begin, k_end);
  } else {
    const u16* wh = static_cast<const u16*>(p.w) + h * p.w_stride_h + k_begin * p.w_stride_k + n0;
    copy_rows_async_to<BN * 2 / 16, kThreads, kStep>(
        Bs, [&](int r, int c) { return b_offset(k_begin + r, c); }, reinterpret_cast<const u8*>(wh),
        p.w_stride_k * 2, rows, rows, p.w, threadIdx.x);
  }
}

// FP8: rows [k_begin, k_end) of a raw e4m3 tile of columns n0.. (kLdRaw bytes per row,
// kScaleWords scale words per row, the first covering the 128 columns that hold n0) into
// the bf16 tile the MMAs read, 8 columns (16 bytes) at a time at Bs + b_offset(k, chunk)
// (dequantise8's rule).  Both FP8 formats arrive as e4m3 bytes plus one 4-byte scale word
// per K row and 128 columns: MXFP8's word holds the four E8M0 bytes of its 32-column
// groups, block FP8's is the fp32 scale of the 128 x 128 block the row lies in.
template <int BN, int kLdRaw, int kScaleWords, WeightKind kWeights, int kThreads, class BOffset>
__device__ __forceinline__ void dequantise_rows(u8* Bs, BOffset b_offset, const u8* raw, const u32* scale_words,
                                                int n0, int k_begin, int k_end) {
  constexpr int kVecs = BN / 8;
  for (int i = threadIdx.x; i < (k_end - k_begin) * kVecs; i += kThreads) {
    const int k = k_begin + i / kVecs, v = i % kVecs;
    const int n = n0 + v * 8;
    const uint2 q = *reinterpret_cast<const uint2*>(raw + k * kLdRaw + v * 8);
    const u32 word = scale_words[k * kScaleWords + (n / 128 - n0 / 128)];
    const float s = scale_of_word<kWeights>(word, (n / 32) % 4);
    *reinterpret_cast<uint4*>(Bs + b_offset(k, v)) = dequantise8(q, s);
  }
}

// ---- Weight-stationary schedules (mla_qproj_ws.cuh, mla_qproj_wg.cuh) ---------------------

// How both stationary families hold their weights: they arrive in kWChunks commit groups
// of K rows, so FP8 weights dequantise chunk by chunk as they land; until then the raw e4m3
// columns (rows padded to keep 16-byte copies aligned) and kScaleWords words of scale
// bytes per K row sit at the config's kOffRaw.
template <int K, int BN, WeightKind kWeights>
struct StationaryWeights {
  static constexpr bool kFp8 = is_fp8(kWeights);
  static constexpr int kScaleWords = BN / 128;
  static constexpr int kLdRaw = BN + 16;
  static constexpr int kSmemRaw = kFp8 ? K * kLdRaw + K * kScaleWords * 4 : 0;
  static constexpr int kWChunks = 4;
  static constexpr int kWChunkRows = K / kWChunks;
  static_assert(K % kWChunks == 0 && BN % 128 == 0, "weight chunks; N blocks of whole scale words");
};

// The CTA's share of a stationary launch: one head, one N block, a contiguous range of
// M tiles.  Units are numbered with the N block fastest, then the M chunk, then the head,
// so the CTAs reading the same q rows run side by side and share them in L2.
struct StationaryUnit {
  int h, n0, first_tile, tiles;
};

template <class C>
__device__ __forceinline__ StationaryUnit stationary_unit(const MlaQprojParams& p) {
  constexpr int kBlocksN = C::N / C::BN;
  const int tiles_m = (p.m + C::BM - 1) / C::BM;
  const int chunks = p.m_chunks;
  const int per_chunk = (tiles_m + chunks - 1) / chunks;
  const int unit = blockIdx.x;
  const int rest = unit / kBlocksN;
  StationaryUnit u;
  u.n0 = unit % kBlocksN * C::BN;
  u.h = rest / chunks;
  u.first_tile = rest % chunks * per_chunk;
  const int left = tiles_m - u.first_tile;
  u.tiles = u.h < p.heads ? (left < per_chunk ? left : per_chunk) : 0;
  return u;
}

// The unit's weight rows, kWChunks commit groups (FP8: raw bytes and scale words), into
// smem + b_offset(k, chunk).
template <class C, class BOffset>
__device__ __forceinline__ void request_stationary_weights(const MlaQprojParams& p, u8* smem, BOffset b_offset,
                                                           const StationaryUnit& u) {
  u8* raw = smem + C::kOffRaw;
  u32* scale_words = reinterpret_cast<u32*>(raw + C::K * C::kLdRaw);
#pragma unroll
  for (int c = 0; c < C::kWChunks; ++c) {
    load_weight_rows<C::BN, C::kLdRaw, C::kScaleWords, C::kWeights, C::kThreads>(
        p, smem, b_offset, raw, scale_words, u.h, u.n0, c * C::kWChunkRows, (c + 1) * C::kWChunkRows);
    cp_async_commit();
  }
}

// FP8: each weight chunk dequantised as it lands, while the chunks after it and the
// groups committed since (q tiles, `later_groups` of them) may still fly.  Ends with the
// raw bytes consumed, so their space may take other copies.
template <class C, class BOffset>
__device__ __forceinline__ void dequantise_stationary_weights(u8* smem, BOffset b_offset, int n0,
                                                              int later_groups) {
  const u8* raw = smem + C::kOffRaw;
#pragma unroll
  for (int c = 0; c < C::kWChunks; ++c) {
    cp_async_wait_pending(C::kWChunks - 1 - c + later_groups);
    __syncthreads();
    dequantise_rows<C::BN, C::kLdRaw, C::kScaleWords, C::kWeights, C::kThreads>(
        smem, b_offset, raw, reinterpret_cast<const u32*>(raw + C::K * C::kLdRaw), n0, c * C::kWChunkRows,
        (c + 1) * C::kWChunkRows);
  }
  __syncthreads();
}

// ---- Warp MMAs (mma.sync: mla_qproj.cuh, mla_qproj_ws.cuh) -------------------------------

// The A fragments of one 16-wide K step at k0 for a warp's kTM 16-row MMA tiles (A
// row-major, kLdA elements per row, from the warp's first row).
template <int kTM, int kLdA>
__device__ __forceinline__ void load_a_frags(u32 (&a)[kTM][4], const u16* As, int k0, int lane) {
#pragma unroll
  for (int i = 0; i < kTM; ++i) ldmatrix_x4(a[i], As + (i * 16 + (lane % 16)) * kLdA + k0 + (lane / 16) * 8);
}

// One warp's MMAs over kSteps 16-wide K steps from k_first: A (row-major, kLdA elements
// per row) starts at the warp's first row; B is read at Bs + b_offset(k, chunk), the warp's
// columns starting at 16-byte chunk b_chunk0.
template <int kTM, int kTN, int kLdA, int kSteps, class BOffset>
__device__ __forceinline__ void warp_mma(float (&acc)[kTM][kTN][4], const u16* As, const u8* Bs, BOffset b_offset,
                                         int b_chunk0, int k_first, int lane) {
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int k0 = k_first + s * 16;
    u32 a[kTM][4];
    load_a_frags<kTM, kLdA>(a, As, k0, lane);
#pragma unroll
    for (int j = 0; j < kTN / 2; ++j) {
      u32 b[4];
      ldmatrix_x4_trans(b, Bs + b_offset(k0 + (lane % 16), b_chunk0 + j * 2 + lane / 16));
#pragma unroll
      for (int i = 0; i < kTM; ++i) {
        mma_bf16_16816(acc[i][2 * j], a[i], b[0], b[1]);
        mma_bf16_16816(acc[i][2 * j + 1], a[i], b[2], b[3]);
      }
    }
  }
}

// FP8: the same with B converted from the raw e4m3 tile in registers (kLdRaw bytes per
// row, raw pointing at the warp's first column; scales the decoded multipliers, kGroups per
// K row, pointing at the warp's first 32-column group).  Per K step and 32-column group, lane
// (g, c) = (lane / 4, lane % 4) reads columns 4g..4g+3 of rows k0+2c, k0+2c+1, k0+2c+8 and
// k0+2c+9 (conflict-free for kLdRaw = BN + 16) and feeds MMA column g of the group's n8
// blocks j = 0..3 with weight column 4g + j: acc[.][4 * group + j] holds columns
// 4 * (MMA column) + j of the group, which stage_acc_mx puts back in order.  Each weight is
// RN_bf16(float(e4m3) * scale), the product rounded to float first: for MXFP8 it is exact,
// so the bits are those of the MXFP8 rule, subnormals included; for block FP8 this is the
// checkpoints' rule.
template <int kTM, int kTN, int kLdA, int kLdRaw, int kGroups, int kSteps>
__device__ __forceinline__ void warp_mma_mx(float (&acc)[kTM][kTN][4], const u16* As, const u8* raw,
                                            const float* scales, int k_first, int lane) {
  static_assert(kTN % 4 == 0, "whole 32-column scale groups per warp");
  const int g = lane / 4, c = lane % 4;
  // The lane's first row (k_first + 2c) in the raw bytes and the scales; every other
  // address below is a constant offset from these.
  const u8* raw_lane = raw + (k_first + 2 * c) * kLdRaw + g * 4;
  const float* scales_lane = scales + (k_first + 2 * c) * kGroups;
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int k0 = k_first + s * 16;
    u32 a[kTM][4];
    load_a_frags<kTM, kLdA>(a, As, k0, lane);
#pragma unroll
    for (int grp = 0; grp < kTN / 4; ++grp) {
      float w[4][4], sc[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int row = s * 16 + q % 2 + q / 2 * 8;  // k0 + 2c + 0, 1, 8, 9 from the lane's first
        e4m3x4_to_float(*reinterpret_cast<const u32*>(raw_lane + row * kLdRaw + grp * 32), w[q]);
        sc[q] = scales_lane[row * kGroups + grp];
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const u32 b0 = pack_bf16x2(__fmul_rn(w[0][j], sc[0]), __fmul_rn(w[1][j], sc[1]));
        const u32 b1 = pack_bf16x2(__fmul_rn(w[2][j], sc[2]), __fmul_rn(w[3][j], sc[3]));
#pragma unroll
        for (int i = 0; i < kTM; ++i) mma_bf16_16816(acc[i][grp * 4 + j], a[i], b0, b1);
      }
    }
  }
}

template <int kTM, int kTN>
__device__ __forceinline__ void zero_acc(float (&acc)[kTM][kTN][4]) {
#pragma unroll
  for (int i = 0; i < kTM; ++i)
#pragma unroll
    for (int j = 0; j < kTN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
}

// ---- Epilogue: outputs staged in shared memory, stored as whole row segments -------------

// e4m3 output's 1 / q_scale (1 for bf16 output).
template <OutKind kOut>
__device__ __forceinline__ float output_inv_scale(const MlaQprojParams& p) {
  return kOut == OutKind::kE4m3 ? rcp_rn(*p.q_scale) : 1.0f;
}

// A warp's mma.sync accumulators into the staged output rows (Cs points at the warp's
// first row and column; kLdC bytes per row).
template <int kTM, int kTN, int kLdC, OutKind kOut>
__device__ __forceinline__ void stage_acc(const float (&acc)[kTM][kTN][4], u8* Cs, int lane, float inv_scale) {
  const int g = lane / 4, c2 = (lane % 4) * 2;
#pragma unroll
  for (int i = 0; i < kTM; ++i)
#pragma unroll
    for (int j = 0; j < kTN; ++j)
#pragma unroll
      for (int half = 0; half < 2; ++half)
        stage_pair<kLdC, kOut>(Cs, i * 16 + g + half * 8, j * 8 + c2, acc[i][j][2 * half], acc[i][j][2 * half + 1],
                               inv_scale);
}

// stage_acc for warp_mma_mx's column order: lane (g, c) holds, per 32-column group, the
// eight consecutive columns 8c..8c+7 of rows g and g + 8 of each 16-row MMA tile.
template <int kTM, int kTN, int kLdC, OutKind kOut>
__device__ __forceinline__ void stage_acc_mx(const float (&acc)[kTM][kTN][4], u8* Cs, int lane, float inv_scale) {
  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int i = 0; i < kTM; ++i)
#pragma unroll
    for (int grp = 0; grp < kTN / 4; ++grp)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = i * 16 + g + half * 8;
        const float(&x)[kTN][4] = acc[i];
        u32 v[4];  // columns 8c + 2t, 8c + 2t + 1
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const int e1 = t / 2, j = (t % 2) * 2;  // column 8c + 4 * e1 + j
          v[t] = pack_bf16x2(x[grp * 4 + j][2 * half + e1], x[grp * 4 + j + 1][2 * half + e1]);
        }
        if (kOut == OutKind::kBf16) {
          *reinterpret_cast<uint4*>(Cs + r * kLdC + (grp * 32 + c * 8) * 2) = make_uint4(v[0], v[1], v[2], v[3]);
        } else {
          const u32 lo = u32(bf16x2_to_e4m3x2(v[0], inv_scale)) | (u32(bf16x2_to_e4m3x2(v[1], inv_scale)) << 16);
          const u32 hi = u32(bf16x2_to_e4m3x2(v[2], inv_scale)) | (u32(bf16x2_to_e4m3x2(v[3], inv_scale)) << 16);
          *reinterpret_cast<uint2*>(Cs + r * kLdC + grp * 32 + c * 8) = make_uint2(lo, hi);
        }
      }
}

// The staged BM x BN outputs of head h, rows m0.., columns n0.., as whole row segments:
// coalesced, and rows >= M are never touched.  Threads tid = 0 .. threads-1 share the work.
template <int BM, int BN, int kLdC, OutKind kOut>
__device__ __forceinline__ void store_staged(const MlaQprojParams& p, const u8* Cs, int m0, int h, int n0, int tid,
                                             int threads) {
  constexpr int kOutBytes = out_bytes(kOut), kVecBytes = 8 * kOutBytes;
  constexpr int kVecs = BN / 8;
  for (int i = tid; i < BM * kVecs; i += threads) {
    const int r = i / kVecs, v = i % kVecs;
    const int m = m0 + r;
    if (m >= p.m) continue;
    store_staged_vec<kOut>(
        static_cast<u8*>(p.out) + (m * p.out_stride_m + h * p.out_stride_h + n0) * kOutBytes + v * kVecBytes,
        Cs + r * kLdC + v * kVecBytes);
  }
}

// ---- RoPE columns ------------------------------------------------------------------------

// One 8-element RoPE vector of row m, head h into the output's last R columns (e4m3:
// scaled like the rest of the row).
template <int N, OutKind kOut>
__device__ __forceinline__ void store_rope_vec(const MlaQprojParams& p, int m, int h, int v, uint4 x,
                                               float inv_scale) {
  const long long o = m * p.out_stride_m + h * p.out_stride_h + N + v * 8;
  if (kOut == OutKind::kBf16) {
    *reinterpret_cast<uint4*>(static_cast<u16*>(p.out) + o) = x;
  } else {
    uint2 y;
    y.x = u32(bf16x2_to_e4m3x2(x.x, inv_scale)) | (u32(bf16x2_to_e4m3x2(x.y, inv_scale)) << 16);
    y.y = u32(bf16x2_to_e4m3x2(x.z, inv_scale)) | (u32(bf16x2_to_e4m3x2(x.w, inv_scale)) << 16);
    *reinterpret_cast<uint2*>(static_cast<u8*>(p.out) + o) = y;
  }
}

// A thread's share of the RoPE vectors (R / 8 per row) of kRows rows from m0, by threads
// tid = 0 .. kThreads-1, held in registers from the loads to the stores so that their round
// trip overlaps other work.  `wanted` false: this CTA copies none of them.  Tid is the
// caller's thread index type (threadIdx.x's unsigned, or a signed index within a team): the
// index arithmetic stays in it.
template <int kRows, int R, int kThreads>
struct RopeRegs {
  static constexpr int kVec = R / 8, kTotal = kRows * kVec;
  static constexpr int kPerThread = (kTotal + kThreads - 1) / kThreads;
  uint4 x[kPerThread];

  // The row of the thread's vector j, or -1 where it has none.
  template <class Tid>
  __device__ __forceinline__ static int row(const MlaQprojParams& p, bool wanted, int m0, Tid tid, int j) {
    const int i = tid + j * kThreads;
    return wanted && (kTotal % kThreads == 0 || i < kTotal) && m0 + i / kVec < p.m ? m0 + i / kVec : -1;
  }
  template <class Tid>
  __device__ __forceinline__ static int vec(Tid tid, int j) {
    return (tid + j * kThreads) % kVec;
  }

  template <class Tid>
  __device__ __forceinline__ void load(const MlaQprojParams& p, bool wanted, int m0, int h, Tid tid) {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int m = row(p, wanted, m0, tid, j), v = vec(tid, j);
      if (m >= 0) x[j] = *reinterpret_cast<const uint4*>(q_pe_of(p) + m * p.q_pe_stride_m + h * p.q_pe_stride_h + v * 8);
    }
  }
  template <int N, OutKind kOut, class Tid>
  __device__ __forceinline__ void store(const MlaQprojParams& p, bool wanted, int m0, int h, Tid tid,
                                        float inv_scale) const {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int m = row(p, wanted, m0, tid, j), v = vec(tid, j);
      if (m >= 0) store_rope_vec<N, kOut>(p, m, h, v, x[j], inv_scale);
    }
  }
};

}  // namespace spark

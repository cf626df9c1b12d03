// The value up-projection's weight-stationary schedule on sm_90a's warp-group MMAs
// (wgmma), for M past decode and at decode for many heads.  A CTA owns 128 columns of one
// head (all of V = 128, half of V = 256) for a contiguous range of 64-row M tiles: it
// copies W_UV[h]'s 128 x L slice into shared memory once (FP8 dequantised on the way),
// then streams the o tiles through rings of 64 x 64 stages and multiplies each with
// m64n128k16 MMAs.  Both operands are K-major (L contiguous), so the weights sit in the
// same 128-byte swizzled layout as the o stages: L / 64 blocks of 128 rows x 128 bytes.
// kGroups warp groups (teams) share the weights and take the CTA's tiles in turn (tile j
// to team j % kGroups); each has its own ring of kStages stages and synchronises only its
// own threads, so one team's epilogue and barriers overlap another's MMAs.  A ring keeps
// its stages in flight but the kHeld its MMAs may still read, and its copies continue
// through each tile's epilogue.  The weights are requested (FP8: loaded and dequantised)
// before the wait on the previous kernel, the activations after.  At decode (kDecode) one
// team takes its single tile in a form of its own, mla_oproj_wg_decode below.
#pragma once

#include "mla_oproj.cuh"
#include "wgmma_sm90.cuh"

namespace spark {

// The layout from the named choices S: V, L, kStages (o stages in a team's ring), kGroups
// (teams), kOut, kWeights.
template <class S>
struct MlaOprojWgConfig : S {
  using S::V, S::L, S::kStages, S::kGroups, S::kDecode, S::kOut, S::kWeights;
  static constexpr bool kFp8 = kWeights != WeightKind::kBf16;
  static constexpr int BM = 64, BN = 128;  // one m64n128 MMA tile per o tile
  static constexpr int kTeamThreads = 128;
  static constexpr int kThreads = kGroups * kTeamThreads;
  // Stages a team's MMAs may still read when it requests the next: two where one team keeps
  // a block's MMAs in flight across the next wait, one where two teams take turns at the
  // tensor cores and each retires its MMAs before its barrier.
  static constexpr int kHeld = kGroups > 1 ? 1 : 2;
  static constexpr int kLBlocks = L / 64;  // 64-element (128-byte) swizzle blocks along L
  static constexpr int kOutBytes = out_bytes(kOut);
  static constexpr int kWBlockBytes = BN * 128;  // a block of weights: BN rows x 128 bytes
  static constexpr int kStageBytes = BM * 128;   // a block of an o tile: BM rows x 128 bytes
  static constexpr int kOffStages = kLBlocks * kWBlockBytes;
  // Per warp: 16 rows x 64 output columns, padded by 16 bytes per row.
  static constexpr int kStageCols = 64;
  static constexpr int kLdC = kStageCols * kOutBytes + 16;
  static constexpr int kSmemWarpC = 16 * kLdC;
  // Decode: the o tile's L blocks of 16 rows, and the 48 rows a 64-row MMA reads past the last.
  static constexpr int kDecodeBlockBytes = 16 * 128;
  static_assert(!kDecode || (kGroups == 1 && kLBlocks * kDecodeBlockBytes + 48 * 128 <= kStages * kStageBytes),
                "decode: one team, its o tile in the ring's room");
  static constexpr int kOffStaging = kOffStages + kGroups * kStages * kStageBytes;
  // Plus 1 KB so the layout can start at the next 1024-byte boundary of the window.
  static constexpr int kSmemBytes = kOffStaging + kGroups * 4 * kSmemWarpC + 1024;
  static_assert(L % 64 == 0 && V % BN == 0, "L in swizzle blocks, V in 128-column units");
  static_assert(kStages >= 3 && kStages <= 10, "the ring (cp_async_wait_group takes kStages - kHeld - 1)");
  static_assert(kGroups == 1 || kGroups == 2, "one or two teams (named barriers 1 and 2)");
  static_assert(kLBlocks % kGroups == 0, "FP8: the teams split each weight row's blocks evenly");
  static_assert(kWBlockBytes % 1024 == 0 && kStageBytes % 1024 == 0 && kOffStages % 1024 == 0,
                "swizzle atoms stay 1024-byte aligned");
};

// Weight row n and 16-byte chunk c of L block b, or o row r and chunk c of a stage.
template <class C>
__device__ __forceinline__ int wg_w_offset(int b, int n, int c) {
  return b * C::kWBlockBytes + swizzle128(n, c);
}

// The CTA's weights into shared memory: bf16 by cp.async (one commit group, or at decode one
// per L block, so that each block's MMAs can start as it lands), FP8 through registers,
// 64-element blocks dequantised as they arrive: thread t owns row t % BN and team t / BN's
// share of the row's L blocks.
template <class C>
__device__ __forceinline__ void wg_load_weights(const MlaOprojParams& p, u8* smem, int h, int n0) {
  if constexpr (!C::kFp8) {
    const u8* src = static_cast<const u8*>(p.w) + (h * p.w_stride_h + n0 * p.w_stride_v) * 2;
#pragma unroll
    for (int b = 0; b < C::kLBlocks; ++b) {
      copy_rows_async_to<8, C::kThreads>(
          smem + b * C::kWBlockBytes, [](int r, int c) { return swizzle128(r, c); }, src + b * 128,
          p.w_stride_v * 2, C::BN, C::BN, p.w, threadIdx.x);
      if (C::kDecode) cp_async_commit();
    }
    if (!C::kDecode) cp_async_commit();
  } else {
    static_assert(C::kTeamThreads == C::BN, "a team's thread per weight row");
    constexpr int kBlocks = C::kLBlocks / C::kGroups;  // of each row, per thread
    constexpr int kBatch = kBlocks < 4 ? kBlocks : 4;  // blocks whose loads are in flight together
    static_assert(kBlocks % kBatch == 0, "whole batches");
    const int n = threadIdx.x % C::BN, first = threadIdx.x / C::BN * kBlocks;
    const u8* row = static_cast<const u8*>(p.w) + h * p.w_stride_h + (n0 + n) * p.w_stride_v;
#pragma unroll
    for (int b0 = first; b0 < first + kBlocks; b0 += kBatch) {
      uint4 raw[kBatch][4];
      float scale[kBatch][2];
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
#pragma unroll
        for (int q = 0; q < 4; ++q) raw[i][q] = *reinterpret_cast<const uint4*>(row + (b0 + i) * 64 + q * 16);
#pragma unroll
        for (int g = 0; g < 2; ++g) scale[i][g] = oproj_scale<C::kWeights, C::V>(p, h, n0 + n, (b0 + i) * 64 + g * 32);
      }
#pragma unroll
      for (int i = 0; i < kBatch; ++i)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const float s = scale[i][q / 2];
          *reinterpret_cast<uint4*>(smem + wg_w_offset<C>(b0 + i, n, 2 * q)) =
              dequantise8(make_uint2(raw[i][q].x, raw[i][q].y), s);
          *reinterpret_cast<uint4*>(smem + wg_w_offset<C>(b0 + i, n, 2 * q + 1)) =
              dequantise8(make_uint2(raw[i][q].z, raw[i][q].w), s);
        }
    }
  }
}

// One L block's four k16 MMAs: the o block at a_base times weight block b, into acc (the
// tile's first block overwrites it).
template <class C>
__device__ __forceinline__ void wg_mma_block(float (&acc)[C::BN / 2], u32 a_base, u32 w_base, int b) {
  wgmma_fence();
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const u64 da = wgmma_desc(a_base + s * 32, 16, 1024);
    const u64 db = wgmma_desc(w_base + b * C::kWBlockBytes + s * 32, 16, 1024);
    wgmma_bf16<C::BN, BMajor::kK>(acc, da, db, b > 0 || s > 0 ? 1 : 0);
  }
  wgmma_commit();
}

// A warp's 16 accumulator rows (output rows row0..row0+15, those below M) through its staging
// buffer into the output's columns n0.. of head h.
template <class C>
__device__ __forceinline__ void wg_store_rows(const MlaOprojParams& p, const float (&acc)[C::BN / 2], u8* stage,
                                              int row0, int h, int n0, int lane, float out_scale) {
  store_warp_rows<C::BN, C::kStageCols, C::kLdC, C::kOut>(
      acc, stage, row0, p.m,
      [&](int m, int col) {
        return static_cast<u8*>(p.out) + (m * p.out_stride_m + h * C::V + n0 + col) * C::kOutBytes;
      },
      lane, C::kOut == OutKind::kE4m3 ? rcp_rn(out_scale) : 1.0f);
}

// Decode (kDecode: M <= 16, one team, one tile).  Each L block of the weights is a copy group
// of its own, and its MMAs start as soon as it lands instead of after the whole slice: the
// tensor cores' ~1 us for the tile runs under the weight stream.  o (at most 16 rows) is read
// after the wait through registers, so none of its copies queue behind the weights', into
// 16-row blocks kDecodeBlockBytes apart: the 64-row MMA reads a block's rows 16..63 from the
// next blocks (or the slack past the last), which only reach accumulator rows that are never
// stored.  Rows M..15 are zeros.
template <class C>
__device__ __forceinline__ void mla_oproj_wg_decode(const MlaOprojParams& p, u8* smem, int h, int n0) {
  static_assert(C::kThreads == 128, "one team: thread t holds o row t / 8, 16-byte chunk t % 8");
  wg_load_weights<C>(p, smem, h, n0);
  grid_dependency_wait();
  grid_dependents_launch();

  u8* o_s = smem + C::kOffStages;
  const int r = threadIdx.x / 8, c = threadIdx.x % 8;
  const u8* src = static_cast<const u8*>(p.o) + (h * p.o_stride_h + r * p.o_stride_m) * 2 + c * 16;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  uint4 v[C::kLBlocks];
#pragma unroll
  for (int b = 0; b < C::kLBlocks; ++b) v[b] = r < p.m ? *reinterpret_cast<const uint4*>(src + b * 128) : zero;
#pragma unroll
  for (int b = 0; b < C::kLBlocks; ++b)
    *reinterpret_cast<uint4*>(o_s + b * C::kDecodeBlockBytes + swizzle128(r, c)) = v[b];
  const float out_scale = C::kOut == OutKind::kE4m3 ? *p.out_scale : 1.0f;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const u32 w_base = smem_addr(smem), o_base = smem_addr(o_s);
  float acc[C::BN / 2];
#pragma unroll
  for (int i = 0; i < C::BN / 2; ++i) acc[i] = 0.0f;
#pragma unroll
  for (int b = 0; b < C::kLBlocks; ++b) {
    // Block b's weights have landed for every thread (FP8: were stored before the wait), and
    // the o stores are visible to the MMAs.
    if constexpr (!C::kFp8) cp_async_wait_pending(C::kLBlocks - 1 - b);
    fence_proxy_async();
    named_barrier<C::kThreads>(1);
    wg_mma_block<C>(acc, o_base + b * C::kDecodeBlockBytes, w_base, b);
  }
  wgmma_wait<0>();
  wgmma_fence_regs(acc);
  if (warp > 0) return;  // rows 16..63: nothing to store
  wg_store_rows<C>(p, acc, smem + C::kOffStaging, 0, h, n0, lane, out_scale);
}

template <class C>
__device__ __forceinline__ void mla_oproj_wg(const MlaOprojParams& p) {
  extern __shared__ __align__(1024) u8 smem_window[];
  u8* smem = smem_window + ((1024u - (smem_addr(smem_window) & 1023u)) & 1023u);

  // The unit: column block fastest, then the M chunk, then the head, so the units that
  // read the same o rows (V = 256) run side by side and share them in L2.
  constexpr int kBlocksN = C::V / C::BN;
  const int tiles_m = (p.m + C::BM - 1) / C::BM;
  const int per_chunk = (tiles_m + p.m_chunks - 1) / p.m_chunks;
  const int n0 = blockIdx.x % kBlocksN * C::BN;
  const int rest = blockIdx.x / kBlocksN;
  const int h = rest / p.m_chunks;
  const int first_tile = rest % p.m_chunks * per_chunk;
  const int left = tiles_m - first_tile;
  const int tiles = h < p.heads ? (left < per_chunk ? left : per_chunk) : 0;
  if (tiles <= 0) return;
  if constexpr (C::kDecode) {
    mla_oproj_wg_decode<C>(p, smem, h, n0);
    return;
  }

  wg_load_weights<C>(p, smem, h, n0);
  grid_dependency_wait();
  grid_dependents_launch();

  // Team `team` takes the CTA's tiles team, team + kGroups, ...  Its ring entry i holds L
  // block i % kLBlocks of its local tile i / kLBlocks; one commit group per entry (empty
  // past the last), so every step waits for the same count.
  const int team = threadIdx.x / C::kTeamThreads, ttid = threadIdx.x % C::kTeamThreads;
  const int my_tiles = tiles > team ? (tiles - team + C::kGroups - 1) / C::kGroups : 0;
  const auto tile_m0 = [&](int j) { return (first_tile + team + j * C::kGroups) * C::BM; };
  u8* stages = smem + C::kOffStages + team * C::kStages * C::kStageBytes;
  const int total = my_tiles * C::kLBlocks;
  const u8* o_head = static_cast<const u8*>(p.o) + h * p.o_stride_h * 2;
  const auto load = [&](int i) {
    if (i < total) {
      const int m0 = tile_m0(i / C::kLBlocks);
      copy_rows_async_to<8, C::kTeamThreads>(
          stages + i % C::kStages * C::kStageBytes, [](int r, int c) { return swizzle128(r, c); },
          o_head + m0 * p.o_stride_m * 2 + i % C::kLBlocks * 128, p.o_stride_m * 2, C::BM, p.m - m0, p.o, ttid);
    }
    cp_async_commit();
  };
#pragma unroll
  for (int i = 0; i < C::kStages - C::kHeld; ++i) load(i);
  // e4m3 out: the scale is read once the first o tiles are requested, not ahead of them.
  const float out_scale = C::kOut == OutKind::kE4m3 ? *p.out_scale : 1.0f;
  // Every thread's weights (bf16: the oldest copy group; FP8: the dequantised stores) are
  // visible to wgmma before any team's first MMA: with one team its first barrier does it.
  if constexpr (C::kGroups > 1) {
    cp_async_wait_group<C::kStages - C::kHeld>();
    fence_proxy_async();
    __syncthreads();
  }

  const int warp = ttid / 32, lane = ttid % 32;
  const u32 w_base = smem_addr(smem), stage_base = smem_addr(stages);
  u8* my_c = smem + C::kOffStaging + threadIdx.x / 32 * C::kSmemWarpC;
  float acc[C::BN / 2];
#pragma unroll
  for (int i = 0; i < C::BN / 2; ++i) acc[i] = 0.0f;

  for (int j = 0; j < my_tiles; ++j) {
#pragma unroll
    for (int b = 0; b < C::kLBlocks; ++b) {
      // Entry i has landed for the whole team; every warp of it has retired the MMAs of
      // entry i - kHeld, so its stage takes entry i + kStages - kHeld.
      const int i = j * C::kLBlocks + b;
      cp_async_wait_group<C::kStages - C::kHeld - 1>();
      fence_proxy_async();
      if constexpr (C::kHeld == 1) wgmma_wait<0>();
      named_barrier<C::kTeamThreads>(1 + team);
      load(i + C::kStages - C::kHeld);

      wg_mma_block<C>(acc, stage_base + i % C::kStages * C::kStageBytes, w_base, b);
      if (C::kHeld == 2 && b < C::kLBlocks - 1) wgmma_wait<1>();
    }

    // The tile's outputs, the warp's 16 rows through its staging buffer.
    wgmma_wait<0>();
    wgmma_fence_regs(acc);
    wg_store_rows<C>(p, acc, my_c, tile_m0(j) + warp * 16, h, n0, lane, out_scale);
  }
}

}  // namespace spark

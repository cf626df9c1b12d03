// The weight-stationary schedule on sm_90a's warp-group MMAs (wgmma).
// As in mla_qproj_ws.cuh, a CTA owns BN weight columns of one head for the whole launch
// (FP8: dequantised once) and a contiguous range of 64-row M tiles.  The weights sit in
// shared memory in the layout wgmma reads directly (64-column panels, 128-byte swizzle), so
// no warp loads B fragments; each q tile is copied into a 128-byte swizzled K-major stage
// that wgmma reads as A.  kGroups teams share the weights and take the unit's tiles in
// turn (tile i to team i % kGroups); each team has its own kQStages q stages and
// synchronises only its own threads, so while one team's MMAs run on the tensor cores the
// others store their outputs: the MMA and store phases of the CTA overlap.  A team is
// kNSplit warp groups that split the tile's BN columns between them (64 x BN / kNSplit
// each): more warps per SM for the same weights and q stages, and each warp's epilogue is
// shorter.  A warp stages its 16 output rows kStageCols columns at a time in its own small
// buffer and stores whole row segments.
#pragma once

#include "mla_qproj_common.cuh"
#include "wgmma_sm90.cuh"

namespace spark {

// The layout from the named choices S (the rendered source's struct): K, N, R (nope,
// latent and RoPE dims), BN (a team's tile is 64 x BN), kGroups (teams), kQStages (q
// stages per team), kNSplit (warp groups per team), kOut, kWeights (output dtype, weight
// format).
template <class S>
struct MlaQprojWgConfig : S, StationaryWeights<S::K, S::BN, S::kWeights> {
  using S::K, S::N, S::R, S::BN, S::kGroups, S::kQStages, S::kNSplit, S::kOut;
  using W = StationaryWeights<S::K, S::BN, S::kWeights>;
  static constexpr int BM = 64;
  static constexpr int kTeamThreads = kNSplit * 128;
  static constexpr int kThreads = kGroups * kTeamThreads;
  static constexpr int kGN = BN / kNSplit;  // a warp group's columns
  static constexpr int kOutBytes = out_bytes(kOut);
  // Weights: BN / 64 panels of K rows x 128 bytes (64 bf16 columns), 128-byte swizzled.
  static constexpr int kPanelBytes = K * 128;
  static constexpr int kSmemW = BN / 64 * kPanelBytes;
  // A q stage: K / 64 blocks of 64 rows x 128 bytes, 128-byte swizzled.
  static constexpr int kSmemQ = BM * K * 2;
  static constexpr int kOffStages = kSmemW;
  // Per warp: 16 rows x kStageCols output columns, padded by 16 bytes per row (64 columns;
  // 32 for bf16 output when warp groups split the tile at K > 128, so that twice the
  // warps' buffers fit beside the larger weights).
  static constexpr int kStageCols = kNSplit > 1 && kOut == OutKind::kBf16 && K > 128 ? 32 : 64;
  static constexpr int kLdC = kStageCols * kOutBytes + 16;
  static constexpr int kSmemWarpC = 16 * kLdC;
  static constexpr int kOffStaging = kOffStages + kGroups * kQStages * kSmemQ;
  static constexpr int kSmemMain = kOffStaging + kGroups * kNSplit * 4 * kSmemWarpC;
  // FP8: the raw weights sit behind every group's first stage until they are dequantised.
  static constexpr int kOffRaw = kOffStages + kGroups * kSmemQ;
  // Plus 1 KB so the layout can start at the next 1024-byte boundary of the window.
  static constexpr int kSmemBytes =
      (kSmemMain > kOffRaw + W::kSmemRaw ? kSmemMain : kOffRaw + W::kSmemRaw) + 1024;

  static_assert(K % 64 == 0, "K in 64-column swizzle blocks");
  static_assert(BN == 128 || BN == 256, "a team's tile is 64 x 128 or 64 x 256");
  static_assert(kGN == 128 || kGN == 256, "a warp group's MMAs are 64 x 128 or 64 x 256");
  static_assert(N % BN == 0 && R % 8 == 0, "N blocks; RoPE vectors");
  static_assert(kGroups >= 1 && kGroups <= 3 && kQStages >= 2 && kQStages <= 4, "teams and stages");
  static_assert(kThreads <= 512, "at most four warp groups");
  static_assert(kSmemW % 1024 == 0 && kSmemQ % 1024 == 0, "swizzle atoms stay 1024-byte aligned");
};

// Weight column n0 + 8 * chunk .. +7 of row k: panel chunk / 8, swizzled within the panel.
template <class C>
struct WgWeightOffset {
  __device__ __forceinline__ int operator()(int k, int chunk) const {
    return chunk / 8 * C::kPanelBytes + swizzle128(k, chunk % 8);
  }
};

// The q_nope rows of M tile `tile` into a stage, by the threads of one team, one 64-column
// K block at a time (eight vectors per row, so a thread steps rows at a fixed column).
template <class C>
__device__ __forceinline__ void wg_load_q(const MlaQprojParams& p, u8* stage, const StationaryUnit& u, int tile,
                                          int ttid) {
  const int m0 = tile * C::BM;
  const u8* src = reinterpret_cast<const u8*>(q_nope_of(p) + u.h * p.q_nope_stride_h + m0 * p.q_nope_stride_m);
#pragma unroll
  for (int b = 0; b < C::K / 64; ++b)
    copy_rows_async_to<8, C::kTeamThreads>(stage + b * (C::BM * 128), [](int r, int c) { return swizzle128(r, c); },
                                           src + b * 128, p.q_nope_stride_m * 2, C::BM, p.m - m0, p.q_nope, ttid);
}

template <class C>
__device__ __forceinline__ void mla_qproj_wg(const MlaQprojParams& p) {
  extern __shared__ __align__(1024) u8 smem_window[];
  u8* smem = smem_window + ((1024u - (smem_addr(smem_window) & 1023u)) & 1023u);
  const StationaryUnit u = stationary_unit<C>(p);
  if (u.tiles <= 0) return;
  // Team `team` takes the tiles; within it warp group `part` owns columns part * kGN...
  const int team = threadIdx.x / C::kTeamThreads, ttid = threadIdx.x % C::kTeamThreads;
  const int part = ttid / 128, warp = ttid % 128 / 32, lane = ttid % 32;
  u8* stages = smem + C::kOffStages;
  const auto stage_at = [&](int local) {
    return stages + ((local % C::kQStages) * C::kGroups + team) * C::kSmemQ;
  };

  pdl_start([&] { request_stationary_weights<C>(p, smem, WgWeightOffset<C>{}, u); });
  const float inv_scale = output_inv_scale<C::kOut>(p);

  // Team t takes the unit's tiles t, t + kGroups, ...; its local tile j sits in stage
  // j % kQStages.  One commit group per local tile (empty past the team's last), so every
  // iteration waits for the same count.
  const int my_tiles = u.tiles > team ? (u.tiles - team + C::kGroups - 1) / C::kGroups : 0;
  const auto load_local = [&](int j) {
    if (j < my_tiles) wg_load_q<C>(p, stage_at(j), u, u.first_tile + team + j * C::kGroups, ttid);
    cp_async_commit();
  };
  load_local(0);
  // FP8: the raw bytes sit behind the first stages, so the other stages are requested
  // after the dequantisation.
  if constexpr (C::kFp8) dequantise_stationary_weights<C>(smem, WgWeightOffset<C>{}, u.n0, /*later_groups=*/1);
#pragma unroll
  for (int j = 1; j < C::kQStages; ++j) load_local(j);
  cp_async_wait_pending(C::kQStages);  // this thread's weight copies have landed
  fence_proxy_async();
  __syncthreads();  // every thread's weights (copies and dequantised stores) are visible to wgmma

  const u32 w_base = smem_addr(smem) + part * (C::kGN / 64) * C::kPanelBytes;
  float acc[C::kGN / 2];
#pragma unroll
  for (int i = 0; i < C::kGN / 2; ++i) acc[i] = 0.0f;
  u8* my_c = smem + C::kOffStaging + (threadIdx.x / 32) * C::kSmemWarpC;
  const int n_warp = u.n0 + part * C::kGN;  // the warp's first output column

  // RoPE rows: the kBlocksN CTAs of a (head, M chunk) each copy their share of every
  // tile's rows, so no N block waits longer than the others.  They come by plain loads
  // one tile ahead (the first now), so their latency hides behind a whole tile.
  constexpr int kBlocksN = C::N / C::BN;
  constexpr int kRopeRows = C::BM / kBlocksN;
  static_assert(C::BM % kBlocksN == 0, "the N blocks share a tile's RoPE rows evenly");
  const int rope_row0 = u.n0 / C::BN * kRopeRows;
  RopeRegs<kRopeRows, C::R, C::kTeamThreads> rope;
  const auto load_rope = [&](int j) {
    if (j >= my_tiles) return;
    const int m0 = (u.first_tile + team + j * C::kGroups) * C::BM;
    rope.load(p, true, m0 + rope_row0, u.h, ttid);
  };
  load_rope(0);

  for (int j = 0; j < my_tiles; ++j) {
    const int m0 = (u.first_tile + team + j * C::kGroups) * C::BM;
    u8* stage = stage_at(j);

    cp_async_wait_group<C::kQStages - 1>();
    fence_proxy_async();
    named_barrier<C::kTeamThreads>(1 + team);  // the tile has landed for the whole team

    const u32 a_base = smem_addr(stage);
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < C::K / 16; ++s) {
      const u64 da = wgmma_desc(a_base + s / 4 * (C::BM * 128) + s % 4 * 32, 16, 1024);
      const u64 db = wgmma_desc(w_base + s * 16 * 128, C::kPanelBytes, 1024);
      wgmma_bf16<C::kGN>(acc, da, db, s > 0 ? 1 : 0);
    }
    wgmma_commit();

    // While the MMAs run: this tile's RoPE rows out, the next tile's requested.
    rope.template store<C::N, C::kOut>(p, true, m0 + rope_row0, u.h, ttid, inv_scale);
    load_rope(j + 1);

    wgmma_wait<0>();
    wgmma_fence_regs(acc);
    named_barrier<C::kTeamThreads>(1 + team);  // the whole team's MMAs have read the stage
    load_local(j + C::kQStages);

    // Outputs: the warp's 16 rows, kStageCols columns at a time through its staging buffer.
    store_warp_rows<C::kGN, C::kStageCols, C::kLdC, C::kOut>(
        acc, my_c, m0 + warp * 16, p.m,
        [&](int m, int col) {
          return static_cast<u8*>(p.out) + (m * p.out_stride_m + u.h * p.out_stride_h + n_warp + col) * C::kOutBytes;
        },
        lane, inv_scale);
  }
}

}  // namespace spark

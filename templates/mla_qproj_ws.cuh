// The weight-stationary schedule of the fused MLA query projection, for larger M.
// A CTA owns BN weight columns of one head for the whole launch: it copies them into
// shared memory once (FP8: dequantises them once, K chunk by K chunk as the copies
// land) and then streams its range of BM-row q tiles through kQStages shared-memory
// stages: while tile i is multiplied and stored, the next tiles' copies are in flight,
// and a tile's outputs are staged in its own stage once its MMAs are done.  Each weight
// byte crosses L2 -> SM once per CTA instead of once per M tile, and the FP8
// dequantisation is paid once per CTA instead of once per tile.
#pragma once

#include "mla_qproj_common.cuh"

namespace spark {

// The layout from the named choices S (the rendered source's struct): K, N, R (nope,
// latent and RoPE dims), BM, BN, WM, WN (CTA tile and warp tile), kQStages (q stages,
// 2..4), kOut, kWeights (output dtype, weight format).
template <class S>
struct MlaQprojWsConfig : S, StationaryWeights<S::K, S::BN, S::kWeights> {
  using S::K, S::N, S::R, S::BM, S::BN, S::WM, S::WN, S::kQStages, S::kOut;
  using W = StationaryWeights<S::K, S::BN, S::kWeights>;
  static constexpr int kWarpsM = BM / WM, kWarpsN = BN / WN;
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;
  static constexpr int kOutBytes = out_bytes(kOut);
  // Rows padded by 16 bytes so the eight row addresses of one ldmatrix hit distinct banks.
  static constexpr int kLdA = K + 8, kLdP = R + 8, kLdB = BN + 8;
  static constexpr int kLdC = BN * kOutBytes + 16;
  static constexpr int kSmemW = (K * kLdB * 2 + 127) / 128 * 128;
  // A stage holds BM q_nope rows and BM q_pe rows (read only by the first N block's CTAs);
  // once they are multiplied, the same bytes stage the tile's outputs.
  static constexpr int kSmemQ = BM * kLdA * 2;
  static constexpr int kStageIn = kSmemQ + BM * kLdP * 2, kStageOut = BM * kLdC;
  static constexpr int kSmemStage = ((kStageIn > kStageOut ? kStageIn : kStageOut) + 127) / 128 * 128;
  // FP8: the raw weights sit in the stages after the first until they are dequantised.
  static constexpr int kOffRaw = kSmemW + kSmemStage;
  static constexpr int kTail = (kQStages - 1) * kSmemStage;
  static constexpr int kSmemBytes = kOffRaw + (kTail > W::kSmemRaw ? kTail : W::kSmemRaw);

  static_assert(K % 16 == 0, "K steps");
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0, "warp tiling");
  static_assert(N % BN == 0 && R % 8 == 0, "N blocks; RoPE vectors");
  static_assert(kQStages >= 2 && kQStages <= 4, "two to four q stages");
};

// The q_nope rows of M tile `tile` (and its q_pe rows for the first N block); rows >= M
// are zero-filled without being read.
template <class C>
__device__ __forceinline__ void ws_load_q(const MlaQprojParams& p, u8* stage, const StationaryUnit& u, int tile) {
  const int m0 = tile * C::BM;
  load_q_rows<C::BM, C::K, C::kLdA, C::kThreads>(p, reinterpret_cast<u16*>(stage), u.h, m0);
  if (u.n0 != 0) return;
  const u16* src = q_pe_of(p) + m0 * p.q_pe_stride_m + u.h * p.q_pe_stride_h;
  copy_rows_async<C::R * 2 / 16, C::kLdP * 2, C::kThreads>(stage + C::kSmemQ, reinterpret_cast<const u8*>(src),
                                                           p.q_pe_stride_m * 2, C::BM, p.m - m0, p.q_pe);
}

// The RoPE columns of a landed tile (first N block only).
template <class C>
__device__ __forceinline__ void ws_copy_rope(const MlaQprojParams& p, const u8* stage, const StationaryUnit& u,
                                             int m0, float inv_scale) {
  if (u.n0 != 0) return;
  const u16* Ps = reinterpret_cast<const u16*>(stage + C::kSmemQ);
  constexpr int kVecs = C::R / 8;
  for (int j = threadIdx.x; j < C::BM * kVecs; j += C::kThreads) {
    const int r = j / kVecs, v = j % kVecs;
    if (m0 + r < p.m)
      store_rope_vec<C::N, C::kOut>(p, m0 + r, u.h, v, *reinterpret_cast<const uint4*>(Ps + r * C::kLdP + v * 8),
                                    inv_scale);
  }
}

template <class C>
__device__ __forceinline__ void mla_qproj_ws(const MlaQprojParams& p) {
  extern __shared__ __align__(128) u8 smem[];
  const StationaryUnit u = stationary_unit<C>(p);
  if (u.tiles <= 0) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / C::kWarpsN, wn = warp % C::kWarpsN;
  constexpr int kTM = C::WM / 16, kTN = C::WN / 8;
  u16* Ws = reinterpret_cast<u16*>(smem);
  u8* stages = smem + C::kSmemW;
  const auto stage_at = [&](int tile_index) { return stages + (tile_index % C::kQStages) * C::kSmemStage; };

  pdl_start([&] { request_stationary_weights<C>(p, smem, RowMajorBf16<C::kLdB>{}, u); });
  const float inv_scale = output_inv_scale<C::kOut>(p);
  ws_load_q<C>(p, stage_at(0), u, u.first_tile);
  cp_async_commit();
  if constexpr (C::kFp8) dequantise_stationary_weights<C>(smem, RowMajorBf16<C::kLdB>{}, u.n0, /*later_groups=*/1);
  // Tiles 1 .. kQStages-2 now; iteration i requests tile i + kQStages-1 into the stage that
  // tile i-1 has released.  One commit group per tile (empty past the unit's last), so
  // every iteration waits for the same count.
#pragma unroll
  for (int s = 1; s < C::kQStages - 1; ++s) {
    if (s < u.tiles) ws_load_q<C>(p, stage_at(s), u, u.first_tile + s);
    cp_async_commit();
  }

  for (int i = 0; i < u.tiles; ++i) {
    u8* stage = stage_at(i);
    const int m0 = (u.first_tile + i) * C::BM;
    __syncthreads();  // the previous tile's staged outputs are stored: its stage is free
    const int ahead = i + C::kQStages - 1;
    if (ahead < u.tiles) ws_load_q<C>(p, stage_at(ahead), u, u.first_tile + ahead);
    cp_async_commit();
    cp_async_wait_group<C::kQStages - 1>();
    __syncthreads();  // tile i has landed for every thread

    ws_copy_rope<C>(p, stage, u, m0, inv_scale);
    float acc[kTM][kTN][4];
    zero_acc(acc);
    warp_mma<kTM, kTN, C::kLdA, C::K / 16>(acc, reinterpret_cast<const u16*>(stage) + wm * C::WM * C::kLdA,
                                           reinterpret_cast<const u8*>(Ws), RowMajorBf16<C::kLdB>{},
                                           wn * C::WN / 8, 0, lane);
    __syncthreads();  // every warp is done reading the stage: it takes the outputs
    stage_acc<kTM, kTN, C::kLdC, C::kOut>(acc, stage + wm * C::WM * C::kLdC + wn * C::WN * C::kOutBytes, lane,
                                          inv_scale);
    __syncthreads();
    store_staged<C::BM, C::BN, C::kLdC, C::kOut>(p, stage, m0, u.h, u.n0, threadIdx.x, C::kThreads);
  }
}

}  // namespace spark

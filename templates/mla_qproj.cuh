// The fused MLA query projection, one CTA per tile:
//   out[m, h, 0:N]   = q_nope[h, m, :] @ W[h]      (bf16 x bf16 -> fp32 -> bf16 | e4m3)
//   out[m, h, N:N+R] = q_pe[m, h, :]               (copied, or scaled to e4m3)
// A tile is BM x BN outputs of one head.  The whole K extent of its q rows and of its
// weight columns is requested at once (16-byte cp.async), so a tile waits for one memory
// round trip, not one per K step; warps then run mma.sync over K, optionally split over
// KSPLIT warp groups and reduced in shared memory in a fixed order.  FP8 weights stay
// raw (one byte each) in shared memory and are dequantised in registers as the warps load
// their MMA fragments, so a tile needs no bf16 copy of its weights and no extra pass.
// Tiles are numbered with N fastest, then M, then heads, so neighbours share q rows and
// weights in L2.
#pragma once

#include "mla_qproj_common.cuh"

namespace spark {

// The per-tile kernel's layout, from its named choices S (the rendered source's struct):
//   K, N, R            nope, latent and RoPE dims
//   BM, BN, WM, WN     CTA tile and warp tile
//   KSPLIT             warp groups splitting K
//   kOut, kWeights     output dtype and weight format
//   KCHUNK, RING       the weights' K chunks and ring slots (below)
//   kFlatCopies        bf16 weight copies by one flat index loop rather than row steps
//                      (copy_rows_async_to)
// KCHUNK / RING: the weights come in K chunks of KCHUNK rows, each chunk its own copy
// group, and the warps start on chunk c as soon as it has landed, so the MMAs (and
// FP8's conversion) of the first chunks run while the later ones are still in flight.
// bf16 weights may stream through a ring of RING < K / KCHUNK slots, so a tile needs only
// RING / (K / KCHUNK) of its weight bytes in shared memory and more CTAs fit on an SM;
// FP8 chunks keep their own rows (RING = K / KCHUNK).  KCHUNK = 0: the whole K at once.
template <class S>
struct MlaQprojTileConfig : S {
  using S::K, S::N, S::R, S::BM, S::BN, S::WM, S::WN, S::KSPLIT, S::kOut, S::kWeights;
  static constexpr int KC = S::KCHUNK == 0 ? K : S::KCHUNK;
  static constexpr int kChunks = K / KC, kRing = S::KCHUNK == 0 ? 1 : S::RING;
  static constexpr bool kFp8 = is_fp8(kWeights);
  static constexpr int kWarpsM = BM / WM, kWarpsN = BN / WN;
  static constexpr int kWarpsPerSplit = kWarpsM * kWarpsN;
  static constexpr int kThreads = kWarpsPerSplit * KSPLIT * 32;
  // A rows padded by 16 bytes: consecutive rows start in different bank groups, so the
  // eight row addresses of one ldmatrix hit distinct banks.  B (bf16 weights) the same for
  // 32-column tiles; wider tiles are unpadded with their 16-byte chunks XOR-swizzled by the
  // row instead (the padding would cost a CTA slot per SM at K = 192).
  static constexpr int kLdA = K + 8;
  using BLayout = Select<(BN >= 64), SwizzledBf16<BN>, RowMajorBf16<BN + 8>>;
  static constexpr int kSmemA = BM * kLdA * 2;
  static constexpr int kSmemSlot = KC * BLayout::kRowBytes;  // one ring slot of bf16 weights
  static constexpr int kSmemB = kFp8 ? 0 : kRing * kSmemSlot;
  static constexpr int kOutBytes = out_bytes(kOut);
  static constexpr int kLdC = BN * kOutBytes + 16;  // bytes per staged output row
  static constexpr int kSmemC = BM * kLdC;
  static constexpr int kSmemRed = (KSPLIT - 1) * kWarpsPerSplit * (WM / 16) * (WN / 8) * 4 * 32 * 4;
  // FP8: the raw e4m3 tile (rows padded to keep 16-byte copies aligned), per K row the
  // one 4-byte word of scale bytes that covers this tile's BN columns, and those scales
  // decoded to float multipliers, one per K row and 32-column group.
  static constexpr int kLdRaw = BN + 16;
  static constexpr int kScaleGroups = BN / 32;
  static constexpr int kSmemRaw = kFp8 ? K * kLdRaw : 0;
  static constexpr int kSmemScales = kFp8 ? K * 4 : 0;
  static constexpr int kSmemScaleF = kFp8 ? K * kScaleGroups * 4 : 0;
  static constexpr int kSmemMain = kSmemA + kSmemB + kSmemRaw + kSmemScales + kSmemScaleF;
  // The tile's copies; its epilogue (reduction + staged output) reuses the same bytes.
  static constexpr int kSmemUsed = kSmemMain > kSmemRed + kSmemC ? kSmemMain : kSmemRed + kSmemC;
  static constexpr int kSmemBytes = (kSmemUsed + 127) / 128 * 128;

  static_assert(K % (16 * KSPLIT) == 0, "K must split into 16-wide steps per warp group");
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0, "warp tiling");
  static_assert(N % BN == 0 && R % 8 == 0, "N tiles and RoPE vectors");
  static_assert(!kFp8 || (BN % 32 == 0 && 128 % BN == 0), "an FP8 tile's scales fit one 4-byte word");
  static_assert(!kFp8 || WN % 32 == 0, "FP8 warps convert whole 32-column scale groups");
  static_assert(K % KC == 0 && KC % (16 * KSPLIT) == 0 && KC % 8 == 0, "K chunks of whole split K steps");
  static_assert(kRing >= 1 && kRing <= kChunks, "ring slots");
  static_assert(kChunks == 1 || !kFp8 || kRing == kChunks, "a ring shorter than the chunks needs bf16 weights");
};

struct Tile {
  int h, m0, n0;
};

template <class C>
__device__ __forceinline__ Tile tile_at(int t, int tiles_m) {
  constexpr int kTilesN = C::N / C::BN;
  return Tile{t / (kTilesN * tiles_m), (t / kTilesN) % tiles_m * C::BM, t % kTilesN * C::BN};
}

// Weight chunk c of a tile (rows c * KC ..) into ring slot c % kRing; the whole K when
// kChunks == 1.  FP8: the first chunk brings the scale words of every K row, so they
// are decoded once, before the first chunk's MMAs.
template <class C>
__device__ __forceinline__ void load_weight_chunk(const MlaQprojParams& p, u8* smem, const Tile& t, int c) {
  u8* raw = smem + C::kSmemA + C::kSmemB;
  u32* scale_words = reinterpret_cast<u32*>(raw + C::kSmemRaw);
  const auto b_offset = [](int k, int chunk) { return typename C::BLayout{}(k % C::KC, chunk); };
  load_weight_rows<C::BN, C::kLdRaw, 1, C::kWeights, C::kThreads, !C::kFlatCopies>(
      p, smem + C::kSmemA + c % C::kRing * C::kSmemSlot, b_offset, raw, scale_words, t.h, t.n0, c * C::KC,
      (c + 1) * C::KC, false);
  if (C::kFp8 && c == 0) load_scale_words<C::kWeights, 1, C::kThreads>(p, scale_words, t.h, t.n0, 0, C::K);
}

// The weight columns a tile needs first (the first kRing chunks, each its own copy group
// when K comes in chunks).
template <class C>
__device__ __forceinline__ void load_weights(const MlaQprojParams& p, u8* smem, const Tile& t) {
#pragma unroll
  for (int c = 0; c < C::kRing; ++c) {
    load_weight_chunk<C>(p, smem, t, c);
    if (C::kChunks > 1) cp_async_commit();
  }
}

// The q rows of a tile through registers, for tiles whose weights come in K chunks: the
// copy groups complete in order and the weights' were committed first, so q must not be
// one of them.  The loads are all issued before the first store waits for them.
template <class C>
struct QRegs {
  static constexpr int kVecs = C::K * 2 / 16, kTotal = C::BM * kVecs;
  static constexpr int kPasses = (kTotal + C::kThreads - 1) / C::kThreads;
  uint4 v[kPasses];
};

template <class C>
__device__ __forceinline__ QRegs<C> load_q_regs(const MlaQprojParams& p, const Tile& t) {
  using Q = QRegs<C>;
  QRegs<C> q;
  const u8* src = reinterpret_cast<const u8*>(q_nope_of(p) + t.h * p.q_nope_stride_h + t.m0 * p.q_nope_stride_m);
#pragma unroll
  for (int n = 0; n < Q::kPasses; ++n) {
    const int i = threadIdx.x + n * C::kThreads, r = i / Q::kVecs, c = i % Q::kVecs;
    q.v[n] = make_uint4(0, 0, 0, 0);
    if (i < Q::kTotal && t.m0 + r < p.m)
      q.v[n] = *reinterpret_cast<const uint4*>(src + r * p.q_nope_stride_m * 2 + c * 16);
  }
  return q;
}

template <class C>
__device__ __forceinline__ void store_q_regs(const QRegs<C>& q, u8* smem) {
  using Q = QRegs<C>;
#pragma unroll
  for (int n = 0; n < Q::kPasses; ++n) {
    const int i = threadIdx.x + n * C::kThreads, r = i / Q::kVecs, c = i % Q::kVecs;
    if (i < Q::kTotal) *reinterpret_cast<uint4*>(smem + r * C::kLdA * 2 + c * 16) = q.v[n];
  }
}

// The RoPE columns, once per (row, head), by the tiles of the first N block; returns
// output_inv_scale.  A thread's q_pe loads are all issued before q_scale is waited for,
// so with e4m3 output the two round trips overlap instead of following each other.
template <class C>
__device__ __forceinline__ float copy_rope(const MlaQprojParams& p, const Tile& t) {
  const bool first_block = t.n0 == 0;
  RopeRegs<C::BM, C::R, C::kThreads> rope;
  rope.load(p, first_block, t.m0, t.h, threadIdx.x);
  const float inv_scale = output_inv_scale<C::kOut>(p);
  rope.template store<C::N, C::kOut>(p, first_block, t.m0, t.h, threadIdx.x, inv_scale);
  return inv_scale;
}

// FP8: the landed scale words of every K row as float multipliers, one per
// row and 32-column group of the tile, so the MMA loop reads them ready (by all threads;
// the caller synchronises before they are read).
template <class C>
__device__ __forceinline__ void decode_scales(u8* smem, int n0) {
  const u32* words = reinterpret_cast<const u32*>(smem + C::kSmemA + C::kSmemB + C::kSmemRaw);
  float* scales = reinterpret_cast<float*>(smem + C::kSmemA + C::kSmemB + C::kSmemRaw + C::kSmemScales);
  constexpr int G = C::kScaleGroups;
  const int first = n0 % 128 / 32;  // the tile's first group within its word
  for (int i = threadIdx.x; i < C::K * G; i += C::kThreads) {
    const int k = i / G, grp = i % G;
    scales[i] = scale_of_word<C::kWeights>(words[k], first + grp);
  }
}

// MMAs over K for the landed tile, then the converted outputs, staged in the same shared
// memory and stored.
template <class C>
__device__ __forceinline__ void compute_and_store(const MlaQprojParams& p, u8* smem, const Tile& t,
                                                  float inv_scale) {
  const u16* As = reinterpret_cast<const u16*>(smem);
  const float* scales = reinterpret_cast<const float*>(smem + C::kSmemA + C::kSmemB + C::kSmemRaw + C::kSmemScales);
  const u8* Bs = smem + C::kSmemA;  // bf16 weights, or FP8 raw bytes and scale words
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int split = warp / C::kWarpsPerSplit;
  const int wrem = warp % C::kWarpsPerSplit;
  const int wm = wrem / C::kWarpsN, wn = wrem % C::kWarpsN;
  constexpr int kTM = C::WM / 16, kTN = C::WN / 8;

  float acc[kTM][kTN][4];
  zero_acc(acc);
  // K chunk c (the whole K when there is one chunk, which has landed with the q rows);
  // with K in chunks each waits for its own copy group.  bf16 weights: chunk c from ring
  // slot c % kRing, which is refilled with chunk c + kRing as soon as every warp is done
  // with it.  FP8: the raw rows of every chunk have their own place, and every row's
  // scales, which came with the first chunk, are decoded before its MMAs.
  constexpr int kChunkSteps = C::KC / 16 / C::KSPLIT;
#pragma unroll
  for (int c = 0; c < C::kChunks; ++c) {
    if (C::kChunks > 1) {
      cp_async_wait_pending(C::kRing - 1 < C::kChunks - 1 - c ? C::kRing - 1 : C::kChunks - 1 - c);
      __syncthreads();
    }
    const int k_first = c * C::KC + split * kChunkSteps * 16;
    if constexpr (C::kFp8) {
      if (c == 0) {
        decode_scales<C>(smem, t.n0);
        __syncthreads();
      }
      warp_mma_mx<kTM, kTN, C::kLdA, C::kLdRaw, C::kScaleGroups, kChunkSteps>(
          acc, As + wm * C::WM * C::kLdA, Bs + wn * C::WN, scales + wn * C::WN / 32, k_first, lane);
    } else {
      const auto b_offset = [c](int k, int chunk) { return typename C::BLayout{}(k - c * C::KC, chunk); };
      warp_mma<kTM, kTN, C::kLdA, kChunkSteps>(acc, As + wm * C::WM * C::kLdA, Bs + c % C::kRing * C::kSmemSlot,
                                               b_offset, wn * C::WN / 8, k_first, lane);
      if (c + C::kRing < C::kChunks) {
        __syncthreads();
        load_weight_chunk<C>(p, smem, t, c + C::kRing);
        cp_async_commit();
      }
    }
  }
  __syncthreads();  // every warp is done with As/Bs: the bytes are reused below

  float* red = reinterpret_cast<float*>(smem);
  u8* Cs = smem + C::kSmemRed;
  if (C::KSPLIT > 1) {
    if (split > 0) {
      float* dst = red + ((split - 1) * C::kWarpsPerSplit + wrem) * (kTM * kTN * 4 * 32);
#pragma unroll
      for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) dst[((i * kTN + j) * 4 + e) * 32 + lane] = acc[i][j][e];
    }
    __syncthreads();
    if (split == 0) {
      for (int s = 1; s < C::KSPLIT; ++s) {
        const float* src = red + ((s - 1) * C::kWarpsPerSplit + wrem) * (kTM * kTN * 4 * 32);
#pragma unroll
        for (int i = 0; i < kTM; ++i)
#pragma unroll
          for (int j = 0; j < kTN; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] += src[((i * kTN + j) * 4 + e) * 32 + lane];
      }
    }
  }

  if (split == 0) {
    u8* warp_cs = Cs + wm * C::WM * C::kLdC + wn * C::WN * C::kOutBytes;
    if constexpr (C::kFp8) {
      stage_acc_mx<kTM, kTN, C::kLdC, C::kOut>(acc, warp_cs, lane, inv_scale);
    } else {
      stage_acc<kTM, kTN, C::kLdC, C::kOut>(acc, warp_cs, lane, inv_scale);
    }
  }
  __syncthreads();
  store_staged<C::BM, C::BN, C::kLdC, C::kOut>(p, Cs, t.m0, t.h, t.n0, tid, C::kThreads);
  // Only a CTA that went on to another tile needed this barrier (the persistent grid, since
  // removed); it stays until a measurement shows that dropping it changes nothing.
  __syncthreads();
}

// One launch, one CTA per tile: tile blockIdx.x.
template <class C>
__device__ __forceinline__ void mla_qproj(const MlaQprojParams& p) {
  extern __shared__ __align__(128) u8 smem[];
  const int tiles_m = (p.m + C::BM - 1) / C::BM;
  const int total = (C::N / C::BN) * tiles_m * p.heads;
  const int t = blockIdx.x;
  if (t >= total) return;

  const Tile tile = tile_at<C>(t, tiles_m);
  pdl_start([&] { load_weights<C>(p, smem, tile); });
  if constexpr (C::kChunks > 1) {
    // q through registers, the RoPE rows meanwhile; the first chunk's wait and barrier in
    // compute_and_store publish the stores.
    const QRegs<C> q = load_q_regs<C>(p, tile);
    const float inv_scale = copy_rope<C>(p, tile);
    store_q_regs<C>(q, smem);
    compute_and_store<C>(p, smem, tile, inv_scale);
  } else {
    load_q_rows<C::BM, C::K, C::kLdA, C::kThreads>(p, reinterpret_cast<u16*>(smem), tile.h, tile.m0);
    cp_async_commit();
    const float inv_scale = copy_rope<C>(p, tile);
    cp_async_wait_all();
    __syncthreads();
    compute_and_store<C>(p, smem, tile, inv_scale);
  }
}

}  // namespace spark

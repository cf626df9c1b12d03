// The fused MLA query projection:
//   out[m, h, 0:N]   = q_nope[h, m, :] @ W[h]      (bf16 x bf16 -> fp32 -> bf16 | e4m3)
//   out[m, h, N:N+R] = q_pe[m, h, :]               (copied, or scaled to e4m3)
// A tile is BM x BN outputs of one head.  The whole K extent of its q rows and of its
// weight columns is requested at once (16-byte cp.async), so a tile waits for one memory
// round trip, not one per K step; warps then run mma.sync over K, optionally split over
// KSPLIT warp groups and reduced in shared memory in a fixed order.  MXFP8 weights stay
// raw (one byte each) in shared memory and are dequantised in registers as the warps load
// their MMA fragments, so a tile needs no bf16 copy of its weights and no extra pass.
// Tiles are numbered with N fastest, then M, then heads, so neighbours share q rows and
// weights in L2.  STAGES == 1: one CTA per tile.  STAGES == 2: a persistent grid; each CTA
// walks tiles gridDim.x apart and requests the next tile's copies into the other shared
// memory stage before computing and storing the current one, so memory never idles.
#pragma once

#include "spark_device.cuh"

namespace spark {

// Kernel parameters, passed by value; mirrored on the host (ops/mla_qproj/plan.h).
struct MlaQprojParams {
  const u16* q_nope;
  long long q_nope_stride_h, q_nope_stride_m;
  const void* w;
  long long w_stride_h, w_stride_k;
  const u8* w_scale;
  long long w_scale_stride_h, w_scale_stride_k;
  const u16* q_pe;
  long long q_pe_stride_m, q_pe_stride_h;
  void* out;
  long long out_stride_m, out_stride_h;
  const float* q_scale;
  int m;
  int heads;
  int m_chunks;  // weight-stationary schedule: M-tile ranges per (head, N block)
};

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

enum class OutKind { kBf16 = 0, kE4m3 = 1 };
enum class WeightKind { kBf16 = 0, kMxfp8 = 1 };

// KCHUNK / RING (one stage): the weights come in K chunks of KCHUNK rows, each chunk its
// own copy group, and the warps start on chunk c as soon as it has landed, so the MMAs (and
// MXFP8's conversion) of the first chunks run while the later ones are still in flight.
// bf16 weights may stream through a ring of RING < K / KCHUNK slots, so a tile needs only
// RING / (K / KCHUNK) of its weight bytes in shared memory and more CTAs fit on an SM;
// MXFP8 chunks keep their own rows (RING = K / KCHUNK).  KCHUNK = 0: the whole K at once.
template <int K_, int N_, int R_, int BM_, int BN_, int WM_, int WN_, int KSPLIT_, int OUT_, int WEIGHTS_,
          int STAGES_, int KCHUNK_ = 0, int RING_ = 1, int FLAT_COPIES_ = 0>
struct MlaQprojConfig {
  static constexpr int K = K_, N = N_, R = R_;
  // bf16 weight copies by one flat index loop rather than row steps (copy_rows_async_to).
  static constexpr bool kFlatCopies = FLAT_COPIES_ != 0;
  static constexpr int BM = BM_, BN = BN_, WM = WM_, WN = WN_, KSPLIT = KSPLIT_, kStages = STAGES_;
  static constexpr int KC = KCHUNK_ == 0 ? K : KCHUNK_;
  static constexpr int kChunks = K / KC, kRing = KCHUNK_ == 0 ? 1 : RING_;
  static constexpr OutKind kOut = OutKind(OUT_);
  static constexpr WeightKind kWeights = WeightKind(WEIGHTS_);
  static constexpr bool kMx = kWeights == WeightKind::kMxfp8;
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
  static constexpr int kSmemB = kMx ? 0 : kRing * kSmemSlot;
  static constexpr int kOutBytes = kOut == OutKind::kBf16 ? 2 : 1;
  static constexpr int kLdC = BN * kOutBytes + 16;  // bytes per staged output row
  static constexpr int kSmemC = BM * kLdC;
  static constexpr int kSmemRed = (KSPLIT - 1) * kWarpsPerSplit * (WM / 16) * (WN / 8) * 4 * 32 * 4;
  // MXFP8: the raw e4m3 tile (rows padded to keep 16-byte copies aligned), per K row the
  // one 4-byte word of scale bytes that covers this tile's BN columns, and those scales
  // decoded to float multipliers, one per K row and 32-column group.
  static constexpr int kLdRaw = BN + 16;
  static constexpr int kScaleGroups = BN / 32;
  static constexpr int kSmemRaw = kMx ? K * kLdRaw : 0;
  static constexpr int kSmemScales = kMx ? K * 4 : 0;
  static constexpr int kSmemScaleF = kMx ? K * kScaleGroups * 4 : 0;
  static constexpr int kSmemMain = kSmemA + kSmemB + kSmemRaw + kSmemScales + kSmemScaleF;
  // One stage holds a tile's copies; its epilogue (reduction + staged output) reuses it.
  static constexpr int kStageRaw = kSmemMain > kSmemRed + kSmemC ? kSmemMain : kSmemRed + kSmemC;
  static constexpr int kStageBytes = (kStageRaw + 127) / 128 * 128;
  static constexpr int kSmemBytes = kStages * kStageBytes;

  static_assert(K % (16 * KSPLIT) == 0, "K must split into 16-wide steps per warp group");
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0, "warp tiling");
  static_assert(N % BN == 0 && R % 8 == 0, "N tiles and RoPE vectors");
  static_assert(!kMx || (BN % 32 == 0 && 128 % BN == 0), "an MXFP8 tile's scales fit one 4-byte word");
  static_assert(!kMx || WN % 32 == 0, "MXFP8 warps convert whole 32-column scale groups");
  static_assert(kStages == 1 || kStages == 2, "one stage, or two for the persistent grid");
  static_assert(K % KC == 0 && KC % (16 * KSPLIT) == 0 && KC % 8 == 0, "K chunks of whole split K steps");
  static_assert(kRing >= 1 && kRing <= kChunks, "ring slots");
  static_assert(kChunks == 1 || (kStages == 1 && (!kMx || kRing == kChunks)),
                "K chunks need one stage; a ring shorter than the chunks needs bf16 weights");
};

struct Tile {
  int h, m0, n0;
};

template <class C>
__device__ __forceinline__ Tile tile_at(int t, int tiles_m) {
  constexpr int kTilesN = C::N / C::BN;
  return Tile{t / (kTilesN * tiles_m), (t / kTilesN) % tiles_m * C::BM, t % kTilesN * C::BN};
}

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

// The same into rows kLd bytes apart, by all kThreads threads of the CTA.
template <int kVecs, int kLd, int kThreads>
__device__ __forceinline__ void copy_rows_async(u8* dst, const u8* src, long long src_stride, int rows,
                                                int valid_rows, const void* fallback) {
  copy_rows_async_to<kVecs, kThreads>(
      dst, [](int r, int c) { return r * kLd + c * 16; }, src, src_stride, rows, valid_rows, fallback,
      threadIdx.x);
}

// MXFP8: per K row in [k_begin, k_end) of head h, the kScaleWords 4-byte words of scale
// bytes that start with the 128 columns holding n0, into scale_words (indexed by row).
template <int kScaleWords, int kThreads>
__device__ __forceinline__ void load_scale_words(const MlaQprojParams& p, u32* scale_words, int h, int n0,
                                                 int k_begin, int k_end) {
  const u8* sh = p.w_scale + h * p.w_scale_stride_h + k_begin * p.w_scale_stride_k + n0 / 128 * 4;
  for (int i = threadIdx.x; i < (k_end - k_begin) * kScaleWords; i += kThreads) {
    const int k = i / kScaleWords, w = i % kScaleWords;
    cp_async_4(scale_words + (k_begin + k) * kScaleWords + w, sh + k * p.w_scale_stride_k + w * 4);
  }
}

// Weight rows [k_begin, k_end) of head h, columns n0 .. n0+BN-1: bf16 to
// Bs + b_offset(k, chunk) (16-byte chunks), or MXFP8 raw bytes into the rows of the same
// index of raw (kLdRaw bytes per row) and, unless with_scales is false, the rows' scale
// words (load_scale_words).
template <int BN, int kLdRaw, int kScaleWords, bool kMx, int kThreads, bool kStep = true, class BOffset>
__device__ __forceinline__ void load_weight_rows(const MlaQprojParams& p, u8* Bs, BOffset b_offset, u8* raw,
                                                 u32* scale_words, int h, int n0, int k_begin, int k_end,
                                                 bool with_scales = true) {
  const int rows = k_end - k_begin;
  if constexpr (kMx) {
    const u8* wh = static_cast<const u8*>(p.w) + h * p.w_stride_h + k_begin * p.w_stride_k + n0;
    copy_rows_async<BN / 16, kLdRaw, kThreads>(raw + k_begin * kLdRaw, wh, p.w_stride_k, rows, rows, p.w);
    if (with_scales) load_scale_words<kScaleWords, kThreads>(p, scale_words, h, n0, k_begin, k_end);
  } else {
    const u16* wh = static_cast<const u16*>(p.w) + h * p.w_stride_h + k_begin * p.w_stride_k + n0;
    copy_rows_async_to<BN * 2 / 16, kThreads, kStep>(
        Bs, [&](int r, int c) { return b_offset(k_begin + r, c); }, reinterpret_cast<const u8*>(wh),
        p.w_stride_k * 2, rows, rows, p.w, threadIdx.x);
  }
}

// Weight chunk c of a tile (rows c * KC ..) into ring slot c % kRing; the whole K when
// kChunks == 1.  MXFP8: the first chunk brings the scale words of every K row, so they
// are decoded once, before the first chunk's MMAs.
template <class C>
__device__ __forceinline__ void load_weight_chunk(const MlaQprojParams& p, u8* stage, const Tile& t, int c) {
  u8* raw = stage + C::kSmemA + C::kSmemB;
  u32* scale_words = reinterpret_cast<u32*>(raw + C::kSmemRaw);
  const auto b_offset = [](int k, int chunk) { return typename C::BLayout{}(k % C::KC, chunk); };
  load_weight_rows<C::BN, C::kLdRaw, 1, C::kMx, C::kThreads, !C::kFlatCopies>(
      p, stage + C::kSmemA + c % C::kRing * C::kSmemSlot, b_offset, raw, scale_words, t.h, t.n0, c * C::KC,
      (c + 1) * C::KC, false);
  if (C::kMx && c == 0) load_scale_words<1, C::kThreads>(p, scale_words, t.h, t.n0, 0, C::K);
}

// The weight columns a tile needs first (the first kRing chunks, each its own copy group
// when K comes in chunks).  Weights do not depend on the previous kernel, so the first
// tile requests them before waiting on it.
template <class C>
__device__ __forceinline__ void load_weights(const MlaQprojParams& p, u8* stage, const Tile& t) {
#pragma unroll
  for (int c = 0; c < C::kRing; ++c) {
    load_weight_chunk<C>(p, stage, t, c);
    if (C::kChunks > 1) cp_async_commit();
  }
}

// BM q_nope rows of head h from row m0 (kLdA elements apart); rows >= M are zero-filled.
template <int BM, int K, int kLdA, int kThreads>
__device__ __forceinline__ void load_q_rows(const MlaQprojParams& p, u16* As, int h, int m0) {
  const u16* src = p.q_nope + h * p.q_nope_stride_h + m0 * p.q_nope_stride_m;
  copy_rows_async<K * 2 / 16, kLdA * 2, kThreads>(reinterpret_cast<u8*>(As), reinterpret_cast<const u8*>(src),
                                                  p.q_nope_stride_m * 2, BM, p.m - m0, p.q_nope);
}

// The q rows of a tile.
template <class C>
__device__ __forceinline__ void load_q(const MlaQprojParams& p, u8* stage, const Tile& t) {
  load_q_rows<C::BM, C::K, C::kLdA, C::kThreads>(p, reinterpret_cast<u16*>(stage), t.h, t.m0);
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
  const u8* src = reinterpret_cast<const u8*>(p.q_nope + t.h * p.q_nope_stride_h + t.m0 * p.q_nope_stride_m);
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
__device__ __forceinline__ void store_q_regs(const QRegs<C>& q, u8* stage) {
  using Q = QRegs<C>;
#pragma unroll
  for (int n = 0; n < Q::kPasses; ++n) {
    const int i = threadIdx.x + n * C::kThreads, r = i / Q::kVecs, c = i % Q::kVecs;
    if (i < Q::kTotal) *reinterpret_cast<uint4*>(stage + r * C::kLdA * 2 + c * 16) = q.v[n];
  }
}

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

// e4m3 output's 1 / q_scale (1 for bf16 output).
template <OutKind kOut>
__device__ __forceinline__ float output_inv_scale(const MlaQprojParams& p) {
  return kOut == OutKind::kE4m3 ? rcp_rn(*p.q_scale) : 1.0f;
}

// The RoPE columns, once per (row, head), by the tiles of the first N block; returns
// output_inv_scale.  A thread's q_pe loads are all issued before q_scale is waited for,
// so with e4m3 output the two round trips overlap instead of following each other.
template <class C>
__device__ __forceinline__ float copy_rope(const MlaQprojParams& p, const Tile& t) {
  constexpr int kVec = C::R / 8, kVecs = C::BM * kVec;
  constexpr int kPerThread = (kVecs + C::kThreads - 1) / C::kThreads;
  const bool first_block = t.n0 == 0;
  const auto row_of = [&](int j) {  // -1 where this thread has no vector j
    const int i = threadIdx.x + j * C::kThreads;
    return first_block && (kVecs % C::kThreads == 0 || i < kVecs) && t.m0 + i / kVec < p.m ? t.m0 + i / kVec : -1;
  };
  uint4 x[kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int m = row_of(j), v = (threadIdx.x + j * C::kThreads) % kVec;
    if (m >= 0) x[j] = *reinterpret_cast<const uint4*>(p.q_pe + m * p.q_pe_stride_m + t.h * p.q_pe_stride_h + v * 8);
  }
  const float inv_scale = output_inv_scale<C::kOut>(p);
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const int m = row_of(j), v = (threadIdx.x + j * C::kThreads) % kVec;
    if (m >= 0) store_rope_vec<C::N, C::kOut>(p, m, t.h, v, x[j], inv_scale);
  }
  return inv_scale;
}

// MXFP8: rows [k_begin, k_end) of a raw e4m3 tile of columns n0.. (kLdRaw bytes per row,
// kScaleWords 4-byte words of scale bytes per row, the first covering the 128 columns
// that hold n0) into the bf16 tile the MMAs read, 8 columns (16 bytes) at a time at
// Bs + b_offset(k, chunk): RN_bf16(float(e4m3) * 2^(byte-127)).  The product is exact in
// float (4 significant bits times a power of two), so one rounding to bf16 gives the
// rule's bits, subnormals included.
template <int BN, int kLdRaw, int kScaleWords, int kThreads, class BOffset>
__device__ __forceinline__ void dequantise_rows(u8* Bs, BOffset b_offset, const u8* raw, const u32* scale_words,
                                                int n0, int k_begin, int k_end) {
  constexpr int kVecs = BN / 8;
  for (int i = threadIdx.x; i < (k_end - k_begin) * kVecs; i += kThreads) {
    const int k = k_begin + i / kVecs, v = i % kVecs;
    const int n = n0 + v * 8;
    const uint2 q = *reinterpret_cast<const uint2*>(raw + k * kLdRaw + v * 8);
    const u32 word = scale_words[k * kScaleWords + (n / 128 - n0 / 128)];
    const float s = e8m0_to_float(u8((word >> (8 * ((n / 32) % 4))) & 0xffu));
    float lo[4], hi[4];
    e4m3x4_to_float(q.x, lo);
    e4m3x4_to_float(q.y, hi);
    uint4 out;
    out.x = pack_bf16x2(__fmul_rn(lo[0], s), __fmul_rn(lo[1], s));
    out.y = pack_bf16x2(__fmul_rn(lo[2], s), __fmul_rn(lo[3], s));
    out.z = pack_bf16x2(__fmul_rn(hi[0], s), __fmul_rn(hi[1], s));
    out.w = pack_bf16x2(__fmul_rn(hi[2], s), __fmul_rn(hi[3], s));
    *reinterpret_cast<uint4*>(Bs + b_offset(k, v)) = out;
  }
}

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

// MXFP8: the same with B converted from the raw e4m3 tile in registers (kLdRaw bytes per
// row, raw pointing at the warp's first column; scales the decoded multipliers, kGroups per
// K row, pointing at the warp's first 32-column group).  Per K step and 32-column group, lane
// (g, c) = (lane / 4, lane % 4) reads columns 4g..4g+3 of rows k0+2c, k0+2c+1, k0+2c+8 and
// k0+2c+9 (conflict-free for kLdRaw = BN + 16) and feeds MMA column g of the group's n8
// blocks j = 0..3 with weight column 4g + j: acc[.][4 * group + j] holds columns
// 4 * (MMA column) + j of the group, which stage_acc_mx puts back in order.  Each weight is
// RN_bf16(float(e4m3) * 2^(byte - 127)): the product is exact in float, so the bits are
// those of the MXFP8 rule, subnormals included.
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

// A warp's accumulators, converted to the output type, into the staged output rows
// (Cs points at the warp's first row and column; kLdC bytes per row).
template <int kTM, int kTN, int kLdC, OutKind kOut>
__device__ __forceinline__ void stage_acc(const float (&acc)[kTM][kTN][4], u8* Cs, int lane, float inv_scale) {
  const int g = lane / 4, c2 = (lane % 4) * 2;
#pragma unroll
  for (int i = 0; i < kTM; ++i)
#pragma unroll
    for (int j = 0; j < kTN; ++j)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = i * 16 + g + half * 8;
        const int c = j * 8 + c2;
        const u32 v = pack_bf16x2(acc[i][j][2 * half], acc[i][j][2 * half + 1]);
        if (kOut == OutKind::kBf16) {
          *reinterpret_cast<u32*>(Cs + r * kLdC + c * 2) = v;
        } else {
          *reinterpret_cast<u16*>(Cs + r * kLdC + c) = bf16x2_to_e4m3x2(v, inv_scale);
        }
      }
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

// The staged BM x BN outputs of head h, rows m0.., columns n0.., as whole 16-byte (bf16)
// or 8-byte (e4m3) row segments: coalesced, and rows >= M are never touched.
// Threads tid = 0 .. threads-1 share the work.
template <int BM, int BN, int kLdC, OutKind kOut>
__device__ __forceinline__ void store_staged(const MlaQprojParams& p, const u8* Cs, int m0, int h, int n0, int tid,
                                             int threads) {
  constexpr int kOutBytes = kOut == OutKind::kBf16 ? 2 : 1;
  constexpr int kVecBytes = kOut == OutKind::kBf16 ? 16 : 8;
  constexpr int kVecs = BN * kOutBytes / kVecBytes;
  for (int i = tid; i < BM * kVecs; i += threads) {
    const int r = i / kVecs, v = i % kVecs;
    const int m = m0 + r;
    if (m >= p.m) continue;
    u8* dst = static_cast<u8*>(p.out) + (m * p.out_stride_m + h * p.out_stride_h + n0) * kOutBytes + v * kVecBytes;
    if (kVecBytes == 16) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(Cs + r * kLdC + v * 16);
    } else {
      *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(Cs + r * kLdC + v * 8);
    }
  }
}

// MXFP8: the landed scale bytes of every K row as float multipliers, one per
// row and 32-column group of the tile, so the MMA loop reads them ready (by all threads;
// the caller synchronises before they are read).
template <class C>
__device__ __forceinline__ void decode_scales(u8* stage, int n0) {
  const u32* words = reinterpret_cast<const u32*>(stage + C::kSmemA + C::kSmemB + C::kSmemRaw);
  float* scales = reinterpret_cast<float*>(stage + C::kSmemA + C::kSmemB + C::kSmemRaw + C::kSmemScales);
  constexpr int G = C::kScaleGroups;
  const int first = n0 % 128 / 32;  // the tile's first group within its word
  for (int i = threadIdx.x; i < C::K * G; i += C::kThreads) {
    const int k = i / G, grp = i % G;
    scales[i] = e8m0_to_float(u8(words[k] >> (8 * (first + grp))));
  }
}

// MMAs over K for one landed tile, then the converted outputs, staged in the same shared
// memory and stored.  Ends with the stage free for the next copies.
template <class C>
__device__ __forceinline__ void compute_and_store(const MlaQprojParams& p, u8* stage, const Tile& t,
                                                  float inv_scale) {
  const u16* As = reinterpret_cast<const u16*>(stage);
  const float* scales = reinterpret_cast<const float*>(stage + C::kSmemA + C::kSmemB + C::kSmemRaw + C::kSmemScales);
  const u8* Bs = stage + C::kSmemA;  // bf16 weights, or MXFP8 raw bytes and scale words
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
  // with it.  MXFP8: the raw rows of every chunk have their own place, and every row's
  // scales, which came with the first chunk, are decoded before its MMAs.
  constexpr int kChunkSteps = C::KC / 16 / C::KSPLIT;
#pragma unroll
  for (int c = 0; c < C::kChunks; ++c) {
    if (C::kChunks > 1) {
      cp_async_wait_pending(C::kRing - 1 < C::kChunks - 1 - c ? C::kRing - 1 : C::kChunks - 1 - c);
      __syncthreads();
    }
    const int k_first = c * C::KC + split * kChunkSteps * 16;
    if constexpr (C::kMx) {
      if (c == 0) {
        decode_scales<C>(stage, t.n0);
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
        load_weight_chunk<C>(p, stage, t, c + C::kRing);
        cp_async_commit();
      }
    }
  }
  __syncthreads();  // every warp is done with As/Bs: the stage is reused below

  float* red = reinterpret_cast<float*>(stage);
  u8* Cs = stage + C::kSmemRed;
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
    if constexpr (C::kMx) {
      stage_acc_mx<kTM, kTN, C::kLdC, C::kOut>(acc, warp_cs, lane, inv_scale);
    } else {
      stage_acc<kTM, kTN, C::kLdC, C::kOut>(acc, warp_cs, lane, inv_scale);
    }
  }
  __syncthreads();
  store_staged<C::BM, C::BN, C::kLdC, C::kOut>(p, Cs, t.m0, t.h, t.n0, tid, C::kThreads);
  __syncthreads();  // the staged outputs are read: the stage may take new copies
}

// One launch: tiles blockIdx.x, blockIdx.x + gridDim.x, ...  (the host launches one CTA per
// tile when kStages == 1, and at most the resident CTAs when kStages == 2).
template <class C>
__device__ __forceinline__ void mla_qproj(const MlaQprojParams& p) {
  extern __shared__ __align__(128) u8 smem[];
  const int tiles_m = (p.m + C::BM - 1) / C::BM;
  const int total = (C::N / C::BN) * tiles_m * p.heads;
  int t = blockIdx.x;
  if (t >= total) return;

  Tile tile = tile_at<C>(t, tiles_m);
  load_weights<C>(p, smem, tile);
  grid_dependency_wait();
  // The next kernel may start now: its CTAs request their weights while this one runs,
  // and wait for it to finish before reading what it writes.
  grid_dependents_launch();
  if constexpr (C::kChunks > 1) {
    // One tile per CTA (kStages == 1): q through registers, the RoPE rows meanwhile; the
    // first chunk's wait and barrier in compute_and_store publish the stores.
    const QRegs<C> q = load_q_regs<C>(p, tile);
    const float inv_scale = copy_rope<C>(p, tile);
    store_q_regs<C>(q, smem);
    compute_and_store<C>(p, smem, tile, inv_scale);
    return;
  }
  load_q<C>(p, smem, tile);
  cp_async_commit();

  for (int stage = 0; t < total; t += gridDim.x, stage ^= 1) {
    u8* cur = smem + stage * C::kStageBytes;
    if constexpr (C::kStages == 2) {
      const int next = t + gridDim.x;
      if (next < total) {
        const Tile nt = tile_at<C>(next, tiles_m);
        u8* other = smem + (stage ^ 1) * C::kStageBytes;
        load_weights<C>(p, other, nt);
        load_q<C>(p, other, nt);
      }
      cp_async_commit();  // possibly empty: keeps one group per tile
    }
    const float inv_scale = copy_rope<C>(p, tile);
    if constexpr (C::kStages == 2) {
      cp_async_wait_group<1>();  // this tile's copies; the next tile's stay in flight
    } else {
      cp_async_wait_all();
    }
    __syncthreads();
    compute_and_store<C>(p, cur, tile, inv_scale);
    if constexpr (C::kStages == 1) break;
    tile = tile_at<C>(t + gridDim.x, tiles_m);
  }
}

}  // namespace spark

// MLA query projection, register-streamed FP8 weights (decode: up to 16 rows a CTA).
//
// A CTA per 16 x BN output tile of one head, KSPLIT warps each taking K / KSPLIT weight
// rows.  No weight byte passes through shared memory: every lane loads its own weights
// straight into registers, all of them at once and before the programmatic-launch wait,
// converts them to bf16 in the shape of mma.sync B fragments, and multiplies; a warp's
// first K step converts while its later steps are still in flight.  At few heads this is
// 7-12 % faster than the per-tile FP8 tiles (bench/NOTES.md v15), whose CTAs wait for
// their weight chunks in shared memory before converting them.
//
// Lane (g, c) = (lane / 4, lane % 4) of a warp loads, per 16-row K step from k0, the kCols
// consecutive columns g * kCols .. of rows k0 + 2c, 2c + 1, 2c + 8 and 2c + 9: one 16-byte
// (BN 128) or 8-byte (BN 64) load per row, eight lanes reading one 128- or 64-byte run of
// each row.  Column j of its run feeds MMA column g of n8 block j, so block j holds the
// tile's columns g * kCols + j and a lane's accumulators (rows g and g + 8, MMA columns 2c
// and 2c + 1) are the tile's columns 2c * kCols + j and (2c + 1) * kCols + j.  The lanes'
// 16 columns lie in one 32-column MXFP8 scale group and one 128-column block, so each row
// needs one scale.  The warps' partial sums meet in shared memory, are added in warp order
// (deterministic), rounded to bf16 and stored as whole row segments.
#pragma once

#include "mla_qproj_common.cuh"

namespace spark {

template <class S>
struct MlaQprojRsConfig : S {
  using S::K, S::N, S::R, S::BN, S::KSPLIT, S::kOut, S::kWeights;
  static constexpr int BM = 16;
  static constexpr int kCols = BN / 8;  // columns per lane: one load per K row
  static constexpr int kThreads = KSPLIT * 32;
  static constexpr int kSteps = K / KSPLIT / 16;  // 16-row K steps per warp
  static constexpr int kLdA = K + 8;
  static constexpr int kSmemA = BM * kLdA * 2;
  // The warps' accumulators, in MMA fragment order: [warp][n8 block][lane][4].
  static constexpr int kSmemRed = KSPLIT * kCols * 32 * 16;
  static constexpr int kSmemUsed = kSmemA > kSmemRed ? kSmemA : kSmemRed;
  static constexpr int kSmemBytes = (kSmemUsed + 127) / 128 * 128;

  static_assert(is_fp8(kWeights), "register-streamed tiles read FP8 weights");
  static_assert(BN == 64 || BN == 128, "16- or 8-byte loads per lane and row");
  static_assert(N % BN == 0 && R % 8 == 0, "N tiles and RoPE vectors");
  static_assert(K % (16 * KSPLIT) == 0, "K splits into 16-row steps per warp");
};

// One lane's weight bytes of one K row: kCols e4m3 values.
template <int kCols>
struct RsRaw;
template <>
struct RsRaw<16> {
  uint4 v;
  __device__ __forceinline__ void load(const u8* src) {
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(src));
  }
  __device__ __forceinline__ u32 word(int i) const { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }
};
template <>
struct RsRaw<8> {
  uint2 v;
  __device__ __forceinline__ void load(const u8* src) {
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(src));
  }
  __device__ __forceinline__ u32 word(int i) const { return i == 0 ? v.x : v.y; }
};

// The scale word of weight row k of head h for the columns from n: MXFP8's byte (in the low
// bits), block FP8's fp32 bits.
template <WeightKind kWeights>
__device__ __forceinline__ u32 rs_scale_word(const MlaQprojParams& p, int h, int k, int n) {
  if constexpr (kWeights == WeightKind::kFp8Block128) {
    const long long row = h * p.w_scale_stride_h + k;
    return *reinterpret_cast<const u32*>(w_scale_of(p) + ((row / 128) * p.w_scale_stride_k + n / 128) * 4);
  } else {
    return w_scale_of(p)[h * p.w_scale_stride_h + k * p.w_scale_stride_k + n / 32];
  }
}

// A lane's weights and scales: per K step, its four rows (k0 + 2c, 2c + 1, 2c + 8, 2c + 9).
template <class C>
struct RsWeights {
  RsRaw<C::kCols> raw[C::kSteps][4];
  u32 scale[C::kSteps][4];

  __device__ __forceinline__ void load(const MlaQprojParams& p, int h, int k_first, int n, int c) {
    const u8* w = static_cast<const u8*>(p.w) + h * p.w_stride_h + n;
#pragma unroll
    for (int s = 0; s < C::kSteps; ++s)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int k = k_first + s * 16 + 2 * c + q % 2 + q / 2 * 8;
        raw[s][q].load(w + k * p.w_stride_k);
        scale[s][q] = rs_scale_word<C::kWeights>(p, h, k, n);
      }
  }

  // Step s as the B fragments of n8 blocks 0 .. kCols-1: RN_bf16(float(e4m3) * scale), the
  // product rounded to float first (exact for MXFP8; the checkpoints' rule for block FP8).
  __device__ __forceinline__ void fragments(int s, u32 (&b)[C::kCols][2]) const {
    float sc[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) sc[q] = scale_of_word<C::kWeights>(scale[s][q], 0);
#pragma unroll
    for (int wd = 0; wd < C::kCols / 4; ++wd) {
      float f[4][4];
#pragma unroll
      for (int q = 0; q < 4; ++q) e4m3x4_to_float(raw[s][q].word(wd), f[q]);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        b[wd * 4 + j][0] = pack_bf16x2(__fmul_rn(f[0][j], sc[0]), __fmul_rn(f[1][j], sc[1]));
        b[wd * 4 + j][1] = pack_bf16x2(__fmul_rn(f[2][j], sc[2]), __fmul_rn(f[3][j], sc[3]));
      }
    }
  }
};

template <class C>
__device__ __forceinline__ void mla_qproj_rs(const MlaQprojParams& p) {
  extern __shared__ __align__(128) u8 smem[];
  constexpr int kTilesN = C::N / C::BN;
  const int tiles_m = (p.m + C::BM - 1) / C::BM;
  const int t = blockIdx.x;
  if (t >= kTilesN * tiles_m * p.heads) return;
  const int h = t / (kTilesN * tiles_m), m0 = (t / kTilesN) % tiles_m * C::BM, n0 = t % kTilesN * C::BN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, c = lane % 4;
  const int k_first = warp * C::kSteps * 16;

  // Weights first: they do not depend on the previous kernel.
  RsWeights<C> w;
  pdl_start([&] { w.load(p, h, k_first, n0 + g * C::kCols, c); });

  u16* As = reinterpret_cast<u16*>(smem);
  load_q_rows<C::BM, C::K, C::kLdA, C::kThreads>(p, As, h, m0);
  cp_async_commit();
  const bool first_block = n0 == 0;
  RopeRegs<C::BM, C::R, C::kThreads> rope;
  rope.load(p, first_block, m0, h, threadIdx.x);
  const float inv_scale = output_inv_scale<C::kOut>(p);
  cp_async_wait_all();
  __syncthreads();

  float acc[C::kCols][4];
#pragma unroll
  for (int j = 0; j < C::kCols; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;
#pragma unroll
  for (int s = 0; s < C::kSteps; ++s) {
    u32 a[1][4];
    load_a_frags<1, C::kLdA>(a, As, k_first + s * 16, lane);
    u32 b[C::kCols][2];
    w.fragments(s, b);
#pragma unroll
    for (int j = 0; j < C::kCols; ++j) mma_bf16_16816(acc[j], a[0], b[j][0], b[j][1]);
  }
  rope.template store<C::N, C::kOut>(p, first_block, m0, h, threadIdx.x, inv_scale);

  // The warps' sums, added in warp order, as whole row segments of eight columns.
  __syncthreads();  // every warp is done with As, whose bytes the sums take
  float4* red = reinterpret_cast<float4*>(smem);
#pragma unroll
  for (int j = 0; j < C::kCols; ++j)
    red[(warp * C::kCols + j) * 32 + lane] = make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
  __syncthreads();
  const float* sums = reinterpret_cast<const float*>(smem);
  constexpr int kVecs = C::BN / 8;  // eight-column vectors per row
  for (int i = threadIdx.x; i < C::BM * kVecs; i += C::kThreads) {
    const int r = i / kVecs, v = i % kVecs;
    if (m0 + r >= p.m) continue;
    float x[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      // Column v * 8 + e of the tile: MMA column col / kCols of n8 block col % kCols, held
      // by lane (r % 8, MMA column / 2) as element 2 * (r / 8) + MMA column % 2.
      const int col = v * 8 + e, mc = col / C::kCols, j = col % C::kCols;
      const int idx = (j * 32 + (r % 8) * 4 + mc / 2) * 4 + 2 * (r / 8) + mc % 2;
      float sum = sums[idx];
#pragma unroll
      for (int ws = 1; ws < C::KSPLIT; ++ws) sum += sums[ws * C::kCols * 32 * 4 + idx];
      x[e] = sum;
    }
    u8* dst = static_cast<u8*>(p.out) +
              ((m0 + r) * p.out_stride_m + h * p.out_stride_h + n0 + v * 8) * out_bytes(C::kOut);
    const u32 v0 = pack_bf16x2(x[0], x[1]), v1 = pack_bf16x2(x[2], x[3]);
    const u32 v2 = pack_bf16x2(x[4], x[5]), v3 = pack_bf16x2(x[6], x[7]);
    if constexpr (C::kOut == OutKind::kBf16) {
      *reinterpret_cast<uint4*>(dst) = make_uint4(v0, v1, v2, v3);
    } else {
      const u32 lo = u32(bf16x2_to_e4m3x2(v0, inv_scale)) | (u32(bf16x2_to_e4m3x2(v1, inv_scale)) << 16);
      const u32 hi = u32(bf16x2_to_e4m3x2(v2, inv_scale)) | (u32(bf16x2_to_e4m3x2(v3, inv_scale)) << 16);
      *reinterpret_cast<uint2*>(dst) = make_uint2(lo, hi);
    }
  }
}

}  // namespace spark

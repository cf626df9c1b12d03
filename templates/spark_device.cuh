// spark device primitives: async copies, ldmatrix/mma wrappers and the exact number
// conversions the output contract needs.  Self-contained (no CUDA headers), so NVRTC
// compiles it quickly and nvcc reads it too.  The conversion helpers are also host
// functions so the CPU tests check them against the reference bit for bit.
#pragma once

#if defined(__CUDACC__)
#define SPARK_HD __host__ __device__ __forceinline__
#define SPARK_DEVICE __device__ __forceinline__
#else
#include <cmath>
#include <cstring>
#define SPARK_HD inline
#endif

namespace spark {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

SPARK_HD u32 float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  u32 u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}

SPARK_HD float bits_float(u32 u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, 4);
  return x;
#endif
}

SPARK_HD float bf16_to_float(u16 v) { return bits_float(u32(v) << 16); }

// Round-to-nearest-even float -> e4m3fn with saturation to +-448 (the behaviour of
// cvt.rn.satfinite.e4m3x2.f32, written out for targets without it).  NaN -> 0x7F|sign.
SPARK_HD u8 float_to_e4m3_soft(float x) {
  const u32 u = float_bits(x);
  const u8 sign = u8((u >> 24) & 0x80u);
  const u32 mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return u8(sign | 0x7f);  // NaN
  const float a = bits_float(mag);
  if (!(a < 448.0f)) return u8(sign | 0x7e);       // >= 448 (inf too) saturates
  if (a < 0.015625f) {                              // below 2^-6: subnormal grid of 2^-9
#if defined(__CUDA_ARCH__)
    const float q = rintf(a * 512.0f);
#else
    const float q = std::nearbyint(a * 512.0f);
#endif
    return u8(sign | u8(q));                        // q == 8 encodes 2^-6 exactly
  }
  const int e = int((mag >> 23) & 0xff) - 127;      // -6..8
  // Keep 3 mantissa bits, round to nearest even on the 20 dropped bits.
  u32 m = mag & 0x7fffffu;
  const u32 keep = m >> 20, rest = m & 0xfffffu, half = 0x80000u;
  u32 code = (u32(e + 7) << 3) + keep;
  if (rest > half || (rest == half && (keep & 1u))) code += 1;  // may carry into the exponent
  if (code > 0x7e) code = 0x7e;
  return u8(sign | u8(code));
}

// Exact e4m3fn -> float (0x7F / 0xFF are NaN).
SPARK_HD float e4m3_to_float(u8 b) {
  const u32 sign = u32(b & 0x80u) << 24;
  const u32 e = (b >> 3) & 0xfu, m = b & 7u;
  if (e == 15 && m == 7) return bits_float(sign | 0x7fc00000u);
  if (e == 0) {
    const float v = float(m) * 0.001953125f;  // m * 2^-9, exact
    return sign ? -v : v;
  }
  return bits_float(sign | ((e + 120u) << 23) | (m << 20));
}

// 2^(byte - 127) as a float (E8M0): byte 0 is 2^-127 (subnormal), 255 is NaN.
SPARK_HD float e8m0_to_float(u8 byte) {
  const u32 b = byte;
  u32 bits = b << 23;
  bits = b == 0 ? 0x00400000u : bits;  // selects, not branches
  bits = b == 255 ? 0x7fc00000u : bits;
  return bits_float(bits);
}

// x * inv clamped to +-448 (NaN stays NaN), as the e4m3 output contract states.
SPARK_HD float scale_clamp_e4m3(float x, float inv) {
#if defined(__CUDA_ARCH__)
  float y = __fmul_rn(x, inv);
#else
  volatile float y = x * inv;
#endif
  float z = y;
  if (z > 448.0f) z = 448.0f;
  if (z < -448.0f) z = -448.0f;
  return z;
}

#if defined(__CUDACC__)

SPARK_DEVICE u32 smem_addr(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy; src_bytes == 0 zero-fills without reading.
SPARK_DEVICE void cp_async_16(void* smem, const void* gmem, u32 src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(src_bytes)
               : "memory");
}
// 4-byte global -> shared copy (scale bytes, whose rows are only 4-byte aligned).
SPARK_DEVICE void cp_async_4(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(smem)), "l"(gmem) : "memory");
}
// 8-byte global -> shared copy (a lane's FP8 weight piece).
SPARK_DEVICE void cp_async_8(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(smem_addr(smem)), "l"(gmem) : "memory");
}
SPARK_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
SPARK_DEVICE void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
// Wait until at most N of this thread's committed groups are still in flight.
template <int N>
SPARK_DEVICE void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// The same with a count known only after unrolling (0..11, a K of 192 in 16-row chunks;
// more waits for everything).
SPARK_DEVICE void cp_async_wait_pending(int n) {
  switch (n) {
    case 0: cp_async_wait_group<0>(); break;
    case 1: cp_async_wait_group<1>(); break;
    case 2: cp_async_wait_group<2>(); break;
    case 3: cp_async_wait_group<3>(); break;
    case 4: cp_async_wait_group<4>(); break;
    case 5: cp_async_wait_group<5>(); break;
    case 6: cp_async_wait_group<6>(); break;
    case 7: cp_async_wait_group<7>(); break;
    case 8: cp_async_wait_group<8>(); break;
    case 9: cp_async_wait_group<9>(); break;
    case 10: cp_async_wait_group<10>(); break;
    case 11: cp_async_wait_group<11>(); break;
    default: cp_async_wait_all(); break;
  }
}

// Programmatic dependent launch: wait for the previous kernel's writes.  A no-op when the
// kernel was not launched as a dependent, and on targets before sm_90.
SPARK_DEVICE void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
SPARK_DEVICE void grid_dependents_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

SPARK_DEVICE void ldmatrix_x4(u32 (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}
SPARK_DEVICE void ldmatrix_x4_trans(u32 (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}

// D = A(16x16 bf16, row) * B(16x8 bf16, col) + D, FP32 accumulators.
SPARK_DEVICE void mma_bf16_16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats -> two bf16 (round to nearest even), lo in the low half.
SPARK_DEVICE u32 pack_bf16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

SPARK_DEVICE float rcp_rn(float x) {
  float r;
  asm("rcp.rn.f32 %0, %1;\n" : "=f"(r) : "f"(x));
  return r;
}

// Two floats -> two e4m3fn bytes, lo in the low byte (RNE; sm_89+ saturates to +-448,
// the software path expects them already clamped).
SPARK_DEVICE u16 pack_e4m3x2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  u16 r;
  asm("{\n .reg .b16 t;\n cvt.rn.satfinite.e4m3x2.f32 t, %1, %2;\n mov.b16 %0, t;\n}\n"
      : "=h"(r)
      : "f"(hi), "f"(lo));
  return r;
#else
  return u16(u16(float_to_e4m3_soft(lo)) | (u16(float_to_e4m3_soft(hi)) << 8));
#endif
}

// Four e4m3fn bytes (byte 0 first) -> four floats, exactly.  One conversion instruction
// per pair on sm_89+ (e4m3 values are exact in f16), the bit decode elsewhere.
SPARK_DEVICE void e4m3x4_to_float(u32 v, float (&f)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  u32 h01, h23;
  asm("{\n .reg .b16 a, b;\n mov.b32 {a, b}, %2;\n cvt.rn.f16x2.e4m3x2 %0, a;\n"
      " cvt.rn.f16x2.e4m3x2 %1, b;\n}\n"
      : "=r"(h01), "=r"(h23)
      : "r"(v));
  asm("{\n .reg .f16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;\n}\n"
      : "=f"(f[0]), "=f"(f[1])
      : "r"(h01));
  asm("{\n .reg .f16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;\n}\n"
      : "=f"(f[2]), "=f"(f[3])
      : "r"(h23));
#else
#pragma unroll
  for (int i = 0; i < 4; ++i) f[i] = e4m3_to_float(u8(v >> (8 * i)));
#endif
}

// The e4m3 output of two bf16 values (packed in a u32) under scale 1/q_scale.  On sm_89+
// the conversion's satfinite is the contract's clamp: it takes anything beyond +-448
// (infinities too) to +-448 and keeps NaN.
SPARK_DEVICE u16 bf16x2_to_e4m3x2(u32 v, float inv) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  return pack_e4m3x2(__fmul_rn(bits_float(v << 16), inv), __fmul_rn(bits_float(v & 0xffff0000u), inv));
#else
  const float lo = scale_clamp_e4m3(bits_float(v << 16), inv);
  const float hi = scale_clamp_e4m3(bits_float(v & 0xffff0000u), inv);
  return pack_e4m3x2(lo, hi);
#endif
}

#endif  // __CUDACC__

}  // namespace spark

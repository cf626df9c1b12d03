// Device-side helpers of spark-bench: random data made on the GPU (gigabytes of weights would
// take seconds on the host), the FP8 -> bf16 dequantisation a server does at load time, an
// output comparison that never copies the outputs back, and a spin kernel that holds the
// stream while the host enqueues a timed batch.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace spark_bench {

// dst[0..n) = bf16 bits of scale * (approximately standard normal), deterministic in
// (seed, index), never zero.  n must be a multiple of 8; dst 16-byte aligned.
void fill_bf16_random(uint16_t* dst, size_t n, uint64_t seed, float scale, cudaStream_t stream);

// MXFP8 weights: values[0..n_values) e4m3 codes of ~N(0, 2^2), never zero or NaN;
// scales[0..n_scales) e8m0 bytes in [120, 124] (2^-7 .. 2^-3).  Multiples of 16 / 4.
void fill_mxfp8_random(uint8_t* values, size_t n_values, uint8_t* scales, size_t n_scales, uint64_t seed,
                       cudaStream_t stream);

// out[r, c] = RN_bf16(bf16(e4m3 values[r, c]) * bf16(2^(scales[r, c / 32] - 127))) (spark.h) for
// `rows` dense rows of 512 values / 16 scale bytes (whole packs at once).
void dequant_mxfp8(const uint8_t* values, const uint8_t* scales, uint16_t* out, size_t rows, cudaStream_t stream);

// Block FP8 weights: values[0..n_values) e4m3 codes as fill_mxfp8_random makes them;
// scales[0..n_scales) fp32 block scales (1 + f) * 2^e, e uniform in -8..-2 and f uniform in
// [0, 1) with 23 random bits: arbitrary mantissas, like a checkpoint's weight_scale_inv (amax /
// 448), so the product's rounding matters.  n_values a multiple of 16.
void fill_fp8_block_random(uint8_t* values, size_t n_values, float* scales, size_t n_scales, uint64_t seed,
                           cudaStream_t stream);

// out[p, c] = RN_bf16(float(values[p, c]) * scales[p / 128, c / 128]), the fp32 product rounded
// to nearest, then once to bf16 (as the checkpoints define block FP8), for `packs` packs of
// rows_per_pack dense rows of 512 values, each followed by its own scale_rows_per_pack rows of
// 4 scales (the L layers' packs at once).
void dequant_fp8_block(const uint8_t* values, const float* scales, uint16_t* out, size_t rows_per_pack,
                       size_t scale_rows_per_pack, size_t packs, cudaStream_t stream);

// Comparison of two outputs of `rows` rows of `cols` elements (bf16 or e4m3 bits), rows `pitch`
// elements apart in both.  counters (device, kCompareCounters x u64, accumulated, zero them
// first): [0] elements whose bits differ, [1] "bad" elements: a NaN in either, or more than 1
// ulp (1 code for e4m3) apart and, for bf16, also more than kCompareAbsTol apart (a near-zero
// sum may legitimately differ by more ulps), [2] NaN in a, [3] elements of a's pad columns
// (cols..pitch) that no longer hold the poison byte 0xFF: a wrote where it must not.  cols 0
// makes every element pad (b is not read): the check of rows a must have left alone.
constexpr double kCompareAbsTol = 1e-4;
constexpr int kCompareCounters = 4;
void compare_bf16(const uint16_t* a, const uint16_t* b, size_t rows, int cols, int pitch,
                  unsigned long long* counters, cudaStream_t stream);
void compare_e4m3(const uint8_t* a, const uint8_t* b, size_t rows, int cols, int pitch,
                  unsigned long long* counters, cudaStream_t stream);

// A one-thread kernel that busy-waits for `ns` nanoseconds of GPU time.
void spin(uint64_t ns, cudaStream_t stream);

}  // namespace spark_bench

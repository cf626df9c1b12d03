// Host side of the MXFP8 GPU suite: the MXFP8 weight layouts (slices of kv_b-like packs),
// the weight generators (exhaustive and realistic), the identity-like q_nope, and the
// bitwise check of an identity run against spark_test::dequant_mxfp8.  No CUDA, no
// doctest: everything returns data or reports, and the suite asserts on them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace spark_gpu {

// Where an MXFP8 weight view lies in its two pack buffers.  Offsets and strides are in
// bytes, which are also elements (e4m3 values and e8m0 scale bytes are one byte each).
struct MxLayout {
  std::string name;
  int H = 0, K = 0;
  int pack_rows = 0;  // rows per head of both packs (K + 256)
  int64_t w_offset = 0, w_stride_h = 0, w_stride_k = 0;
  int64_t s_offset = 0, s_stride_h = 0, s_stride_k = 0;

  // The first K rows of each head of a [H, K+256, 512] e4m3 value pack and of a
  // [H, K+256, 16] e8m0 scale pack: w_stride_h = (K+256)*512, w_stride_k = 512,
  // w_scale_stride_h = (K+256)*16, w_scale_stride_k = 16, both views at the packs' bases.
  static MxLayout standard(int H, int K);
  // Padded pitches: values with w_stride_k = 528, w_stride_h = (K+256)*528 + 32 and the
  // view 48 bytes into its pack (16-byte aligned); scales with w_scale_stride_k = 20,
  // w_scale_stride_h = (K+256)*20 + 12 and the view 4 bytes into its pack (4-byte aligned).
  static MxLayout padded(int H, int K);

  size_t w_bytes() const { return static_cast<size_t>(w_offset + static_cast<int64_t>(H) * w_stride_h); }
  size_t s_bytes() const { return static_cast<size_t>(s_offset + static_cast<int64_t>(H) * s_stride_h); }
  size_t w_index(int h, int k, int n) const {
    return static_cast<size_t>(w_offset + h * w_stride_h + k * w_stride_k + n);
  }
  size_t s_index(int h, int k, int j) const {
    return static_cast<size_t>(s_offset + h * s_stride_h + k * s_stride_k + j);
  }
  std::string describe() const;
};

// Host copy of one MXFP8 weight tensor: both pack buffers, whole.  Every byte outside the
// view (the pack's other rows, pitch columns, the bytes before the view) is 0xFF: an e4m3
// NaN value and the NaN scale 255, so a kernel reading outside the view produces NaN.
struct MxWeights {
  static constexpr int kN = 512;
  static constexpr int kGroups = kN / 32;  // scale bytes per K row
  static constexpr uint8_t kOutsideByte = 0xFF;

  MxLayout layout;
  std::vector<uint8_t> values;  // layout.w_bytes()
  std::vector<uint8_t> scales;  // layout.s_bytes()

  explicit MxWeights(const MxLayout& l);
  int H() const { return layout.H; }
  int K() const { return layout.K; }
  uint8_t& value(int h, int k, int n) { return values[layout.w_index(h, k, n)]; }
  uint8_t value(int h, int k, int n) const { return values[layout.w_index(h, k, n)]; }
  uint8_t& scale(int h, int k, int j) { return scales[layout.s_index(h, k, j)]; }
  uint8_t scale(int h, int k, int j) const { return scales[layout.s_index(h, k, j)]; }
  // spark_test::dequant_mxfp8 of element (h, k, n).
  uint16_t dequant(int h, int k, int n) const;
  // Dense bf16 [H, K, 512] of dequant() (what the reference and cuBLAS multiply by).
  std::vector<uint16_t> dequantised() const;
};

// Scale bytes for which the exhaustive fill pairs EVERY non-NaN value code with the byte
// (eight 32-value groups holding all 254 codes): the bytes whose products are bf16
// subnormals or round (0..10), one plain byte (127) and the largest finite ones (240..246).
const std::vector<uint8_t>& full_coverage_scale_bytes();

// Exhaustive weights for the bitwise identity test: value bytes uniformly random over the
// 254 non-NaN e4m3 codes (0x7F / 0xFF avoided; 0x00 / 0x80 included); scale bytes over
// 0..246, every byte at least once, plus the full-coverage groups above, placed at
// shuffled (h, k, group) positions.  Bytes > 246 are avoided: 448 * 2^120 is inf in bf16,
// and 0 * inf in the other K rows would turn whole columns into NaN.  Returns false (and
// fills nothing) when the view has too few groups for the coverage (H*K*16 < 399).
bool fill_mx_exhaustive(MxWeights& w, uint64_t seed);

// Realistic weights: values e4m3(N(0, 64^2)) (never zero; saturation beyond 7 sigma), scale
// bytes uniform in 118..130 (2^-9 .. 2^3).
void fill_mx_realistic(MxWeights& w, uint64_t seed);

// What the view holds (the suite's self-check of the generators).
struct MxCoverage {
  std::array<size_t, 256> scale_count{};  // per scale byte, over the H*K*16 groups
  std::array<size_t, 256> value_count{};  // per value code, over the H*K*512 values
  // Per scale byte: how many distinct non-NaN value codes share a group with it.
  std::array<int, 256> codes_with_byte{};
};
MxCoverage mx_coverage(const MxWeights& w);
// What fill_mx_exhaustive promises and `w` lacks: "" when every scale byte 0..246 is used
// (none above), every non-NaN value code (no NaN value), and every full-coverage byte paired
// with all 254 non-NaN codes; else the counts of each gap, for the test's message.
std::string mx_coverage_gaps(const MxWeights& w);

// Identity-like q: bf16 [M, H, K+R] token-major; q_nope row m of every head is the unit
// vector e_{m mod K} (1.0 at k = m mod K, +0 elsewhere: the only zeros of the inputs);
// q_pe is random (never zero).
void make_identity_q(int H, int K, int R, int M, uint64_t seed, std::vector<uint16_t>& q);

// The bitwise check of one identity run.  With q row (row0 + m) = e_k, k = (row0 + m) mod K,
// out[m, h, n] must be exactly dequant(h, k, n) -- except:
//   - ref +-0 and out -+0 are accepted (1 * w + sum of 0 * w' can turn -0 into +0) and counted;
//   - a column (h, n) of W holding a NaN (a NaN value code or scale byte 255 anywhere in
//     K) must be NaN in EVERY row: in the row whose unit vector hits the NaN because
//     dequant is NaN ("direct"), in the others because 0 * NaN = NaN ("indirect").
// out[m, h, 512 + r] must be bitwise q_pe of q row (row0 + m).
struct IdentityReport {
  size_t runs = 0;
  size_t checked = 0;             // finite-column nope elements compared
  size_t exact = 0;
  size_t zero_sign_accepted = 0;  // ref +-0, out -+0
  size_t mismatches = 0;          // everything else that is not bitwise the rule
  size_t ref_subnormal_mismatches = 0;  // ... whose reference is a bf16 subnormal
  size_t flushed_to_zero = 0;           // ... of those, returned as +-0
  size_t ref_subnormal_checked = 0;     // subnormal references compared
  size_t nan_expected = 0;              // elements of NaN columns
  size_t nan_missing_direct = 0;
  size_t nan_missing_indirect = 0;
  size_t rope_checked = 0;
  size_t rope_mismatches = 0;
  std::array<size_t, 256> checked_by_scale{};
  std::array<size_t, 256> mismatch_by_scale{};
  std::array<size_t, 256> subnormal_ref_by_scale{};
  std::array<size_t, 256> mismatch_by_value{};
  std::vector<std::string> examples;      // the first mismatches
  std::vector<std::string> nan_examples;  // the first missing NaNs
  std::vector<std::string> rope_examples;

  void merge(const IdentityReport& o);
  // A multi-line account of the mismatches: counts, the scale bytes and value codes
  // involved, whether it looks like a subnormal flush, and examples.
  std::string mismatch_details() const;
  std::string nan_details() const;
  std::string rope_details() const;
};

// out: the bf16 out buffer (pitch 584 per head, H heads per row), rows 0..M-1 of this run
// at its start; q: the host q of make_identity_q (at least row0 + M rows).
IdentityReport check_identity(const MxWeights& w, const std::vector<uint16_t>& q, int R, int row0, int M,
                              const uint16_t* out, int out_pitch);

}  // namespace spark_gpu

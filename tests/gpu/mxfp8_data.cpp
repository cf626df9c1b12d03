// Host side of the MXFP8 GPU suite.  See mxfp8_data.h.
#include "tests/gpu/mxfp8_data.h"

#include <algorithm>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "tests/support/reference.h"

namespace spark_gpu {

using namespace spark_test;

namespace {

constexpr int kExtraPackRows = 256;  // pack rows past the view's K (the rest of kv_b)
constexpr uint8_t kMaxFiniteScaleByte = 246;  // 448 * 2^(246-127) = 1.75 * 2^127 < bf16 max
constexpr int kMaxExamples = 12;

std::string hex2(unsigned v) {
  std::ostringstream o;
  o << "0x" << std::hex << std::setw(2) << std::setfill('0') << v;
  return o.str();
}
std::string hex4(unsigned v) {
  std::ostringstream o;
  o << "0x" << std::hex << std::setw(4) << std::setfill('0') << v;
  return o.str();
}

bool bf16_is_zero(uint16_t b) { return (b & 0x7FFFu) == 0; }
bool bf16_is_subnormal(uint16_t b) { return (b & 0x7F80u) == 0 && (b & 0x007Fu) != 0; }

// The 254 non-NaN e4m3 codes.
std::vector<uint8_t> non_nan_codes() {
  std::vector<uint8_t> c;
  for (int v = 0; v < 256; ++v)
    if (!e4m3_is_nan(static_cast<uint8_t>(v))) c.push_back(static_cast<uint8_t>(v));
  return c;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Layouts and weights
// ---------------------------------------------------------------------------------------

MxLayout MxLayout::standard(int H, int K) {
  MxLayout l;
  l.name = "standard";
  l.H = H;
  l.K = K;
  l.pack_rows = K + kExtraPackRows;
  l.w_offset = 0;
  l.w_stride_k = 512;
  l.w_stride_h = static_cast<int64_t>(l.pack_rows) * 512;
  l.s_offset = 0;
  l.s_stride_k = 16;
  l.s_stride_h = static_cast<int64_t>(l.pack_rows) * 16;
  return l;
}

MxLayout MxLayout::padded(int H, int K) {
  MxLayout l;
  l.name = "padded";
  l.H = H;
  l.K = K;
  l.pack_rows = K + kExtraPackRows;
  l.w_offset = 48;
  l.w_stride_k = 528;
  l.w_stride_h = static_cast<int64_t>(l.pack_rows) * 528 + 32;
  l.s_offset = 4;
  l.s_stride_k = 20;
  l.s_stride_h = static_cast<int64_t>(l.pack_rows) * 20 + 12;
  return l;
}

std::string MxLayout::describe() const {
  std::ostringstream o;
  o << name << " layout (w +" << w_offset << " B, w_stride_h " << w_stride_h << ", w_stride_k " << w_stride_k
    << "; w_scale +" << s_offset << " B, w_scale_stride_h " << s_stride_h << ", w_scale_stride_k " << s_stride_k
    << ")";
  return o.str();
}

MxWeights::MxWeights(const MxLayout& l)
    : layout(l), values(l.w_bytes(), kOutsideByte), scales(l.s_bytes(), kOutsideByte) {}

uint16_t MxWeights::dequant(int h, int k, int n) const {
  return dequant_mxfp8(value(h, k, n), scale(h, k, n / 32));
}

std::vector<uint16_t> MxWeights::dequantised() const {
  const int Hh = H(), Kk = K();
  std::vector<uint16_t> d(static_cast<size_t>(Hh) * Kk * kN);
  parallel_for(static_cast<size_t>(Hh) * Kk, [&](size_t b, size_t e, unsigned) {
    for (size_t hk = b; hk < e; ++hk) {
      const int h = static_cast<int>(hk / Kk), k = static_cast<int>(hk % Kk);
      uint16_t* row = d.data() + hk * kN;
      for (int n = 0; n < kN; ++n) row[n] = dequant(h, k, n);
    }
  });
  return d;
}

const std::vector<uint8_t>& full_coverage_scale_bytes() {
  static const std::vector<uint8_t> bytes = [] {
    std::vector<uint8_t> b;
    for (int v = 0; v <= 10; ++v) b.push_back(static_cast<uint8_t>(v));
    b.push_back(127);
    for (int v = 240; v <= kMaxFiniteScaleByte; ++v) b.push_back(static_cast<uint8_t>(v));
    return b;
  }();
  return bytes;
}

bool fill_mx_exhaustive(MxWeights& w, uint64_t seed) {
  const int H = w.H(), K = w.K();
  const size_t G = static_cast<size_t>(H) * K * MxWeights::kGroups;
  const std::vector<uint8_t>& cover = full_coverage_scale_bytes();
  const size_t needed = cover.size() * 8 + (kMaxFiniteScaleByte + 1);
  if (G < needed) return false;

  const std::vector<uint8_t> codes = non_nan_codes();  // 254
  Rng rng(seed);
  auto random_code = [&] { return codes[rng.next_u64() % codes.size()]; };
  struct Group {
    uint8_t scale;
    uint8_t v[32];
  };
  std::vector<Group> groups(G);
  size_t g = 0;
  // 1. Every non-NaN code with each full-coverage byte: 256 slots = 254 codes + 2 random.
  for (uint8_t b : cover) {
    std::vector<uint8_t> perm = codes;
    perm.push_back(random_code());
    perm.push_back(random_code());
    std::shuffle(perm.begin(), perm.end(), rng.engine());
    for (int i = 0; i < 8; ++i, ++g) {
      groups[g].scale = b;
      std::memcpy(groups[g].v, perm.data() + 32 * i, 32);
    }
  }
  // 2. Every scale byte 0..246 at least once; 3. the rest random.
  for (; g < G; ++g) {
    const size_t i = g - cover.size() * 8;
    groups[g].scale = i <= kMaxFiniteScaleByte ? static_cast<uint8_t>(i)
                                               : static_cast<uint8_t>(rng.next_u64() % (kMaxFiniteScaleByte + 1));
    for (uint8_t& v : groups[g].v) v = random_code();
  }
  // Shuffled placement over (h, k, group).
  std::shuffle(groups.begin(), groups.end(), rng.engine());
  for (int h = 0; h < H; ++h) {
    for (int k = 0; k < K; ++k) {
      for (int j = 0; j < MxWeights::kGroups; ++j) {
        const Group& gr = groups[(static_cast<size_t>(h) * K + k) * MxWeights::kGroups + j];
        w.scale(h, k, j) = gr.scale;
        std::memcpy(&w.value(h, k, 32 * j), gr.v, 32);
      }
    }
  }
  return true;
}

void fill_mx_realistic(MxWeights& w, uint64_t seed) {
  const int H = w.H(), K = w.K();
  const size_t rows = static_cast<size_t>(H) * K;
  std::vector<uint16_t> normal(rows * MxWeights::kN);
  fill_bf16_random(normal.data(), normal.size(), seed, 64.0f);
  const uint64_t skey = mix64(seed ^ 0x5CA1E5ull);
  parallel_for(rows, [&](size_t b, size_t e, unsigned) {
    for (size_t hk = b; hk < e; ++hk) {
      const int h = static_cast<int>(hk / K), k = static_cast<int>(hk % K);
      const uint16_t* src = normal.data() + hk * MxWeights::kN;
      uint8_t* dst = &w.value(h, k, 0);
      for (int n = 0; n < MxWeights::kN; ++n) {
        uint8_t c = float_to_e4m3_satfinite_rne(bf16_to_float(src[n]));
        if ((c & 0x7Fu) == 0) c = static_cast<uint8_t>(c | 0x01u);  // never zero: +-2^-9
        dst[n] = c;
      }
      for (int j = 0; j < MxWeights::kGroups; ++j) {
        const uint64_t r = mix64(skey ^ (0xD1B54A32D192ED03ull * (hk * MxWeights::kGroups + j + 1)));
        w.scale(h, k, j) = static_cast<uint8_t>(118 + r % 13);
      }
    }
  });
}

MxCoverage mx_coverage(const MxWeights& w) {
  MxCoverage c;
  std::vector<std::array<bool, 256>> pairs(256);
  for (auto& p : pairs) p.fill(false);
  for (int h = 0; h < w.H(); ++h) {
    for (int k = 0; k < w.K(); ++k) {
      for (int j = 0; j < MxWeights::kGroups; ++j) {
        const uint8_t s = w.scale(h, k, j);
        ++c.scale_count[s];
        for (int i = 0; i < 32; ++i) {
          const uint8_t v = w.value(h, k, 32 * j + i);
          ++c.value_count[v];
          if (!e4m3_is_nan(v)) pairs[s][v] = true;
        }
      }
    }
  }
  for (int s = 0; s < 256; ++s) c.codes_with_byte[s] = static_cast<int>(std::count(pairs[s].begin(), pairs[s].end(), true));
  return c;
}

std::string mx_coverage_gaps(const MxWeights& w) {
  const MxCoverage cov = mx_coverage(w);
  size_t missing_bytes = 0, large_bytes = 0, missing_codes = 0, nan_codes = 0, incomplete_pairs = 0;
  for (int b = 0; b <= 246; ++b) missing_bytes += cov.scale_count[b] == 0;
  for (int b = 247; b <= 255; ++b) large_bytes += cov.scale_count[b];
  for (int v = 0; v < 256; ++v) {
    if (e4m3_is_nan(static_cast<uint8_t>(v))) {
      nan_codes += cov.value_count[v];
    } else {
      missing_codes += cov.value_count[v] == 0;
    }
  }
  for (uint8_t b : full_coverage_scale_bytes()) incomplete_pairs += cov.codes_with_byte[b] != 254;
  if (missing_bytes + large_bytes + missing_codes + nan_codes + incomplete_pairs == 0) return "";
  std::ostringstream o;
  o << "generator coverage: " << missing_bytes << " scale bytes of 0..246 missing, " << large_bytes
    << " groups with bytes > 246, " << missing_codes << " non-NaN codes missing, " << nan_codes << " NaN values, "
    << incomplete_pairs << " full-coverage bytes not paired with all 254 codes";
  return o.str();
}

void make_identity_q(int H, int K, int R, int M, uint64_t seed, std::vector<uint16_t>& q) {
  const size_t row = static_cast<size_t>(K + R);
  q.assign(static_cast<size_t>(M) * H * row, 0);
  fill_bf16_random(q.data(), q.size(), seed, 1.0f);  // q_pe (and the nope part, overwritten)
  for (int m = 0; m < M; ++m) {
    for (int h = 0; h < H; ++h) {
      uint16_t* nope = q.data() + (static_cast<size_t>(m) * H + h) * row;
      std::fill(nope, nope + K, static_cast<uint16_t>(0x0000));
      nope[m % K] = 0x3F80;  // bf16 1.0
    }
  }
}

// ---------------------------------------------------------------------------------------
// The identity check
// ---------------------------------------------------------------------------------------

void IdentityReport::merge(const IdentityReport& o) {
  runs += o.runs;
  checked += o.checked;
  exact += o.exact;
  zero_sign_accepted += o.zero_sign_accepted;
  mismatches += o.mismatches;
  ref_subnormal_mismatches += o.ref_subnormal_mismatches;
  flushed_to_zero += o.flushed_to_zero;
  ref_subnormal_checked += o.ref_subnormal_checked;
  nan_expected += o.nan_expected;
  nan_missing_direct += o.nan_missing_direct;
  nan_missing_indirect += o.nan_missing_indirect;
  rope_checked += o.rope_checked;
  rope_mismatches += o.rope_mismatches;
  for (int i = 0; i < 256; ++i) {
    checked_by_scale[i] += o.checked_by_scale[i];
    mismatch_by_scale[i] += o.mismatch_by_scale[i];
    subnormal_ref_by_scale[i] += o.subnormal_ref_by_scale[i];
    mismatch_by_value[i] += o.mismatch_by_value[i];
  }
  auto append = [](std::vector<std::string>& dst, const std::vector<std::string>& src) {
    for (const auto& s : src)
      if (dst.size() < static_cast<size_t>(kMaxExamples)) dst.push_back(s);
  };
  append(examples, o.examples);
  append(nan_examples, o.nan_examples);
  append(rope_examples, o.rope_examples);
}

std::string IdentityReport::mismatch_details() const {
  std::ostringstream o;
  o << mismatches << " of " << checked << " nope elements (" << runs << " runs) are not bitwise dequant_mxfp8: "
    << ref_subnormal_mismatches << " with a bf16-subnormal reference (of " << ref_subnormal_checked
    << " subnormal references checked), " << flushed_to_zero << " of those returned as +-0";
  if (mismatches == 0) return o.str();
  if (flushed_to_zero == mismatches) {
    o << "\n  EVERY mismatch is a bf16-subnormal reference returned as zero: the kernel's dequantisation or "
         "its tensor-core MMA flushes bf16 subnormals (FTZ); the rule RN_bf16(bf16(v) * bf16(2^(b-127))) keeps "
         "them.";
  } else if (ref_subnormal_mismatches == mismatches) {
    o << "\n  every mismatch has a bf16-subnormal reference (subnormal rounding / flushing differs from the rule)";
  }
  // Every byte / code when few are involved (a subnormal flush touches bytes 0..9 only);
  // the first ones otherwise.
  constexpr int kMaxListed = 64;
  o << "\n  scale bytes with mismatches (mismatched / checked with this byte, [subnormal refs among the checked]):";
  int shown = 0, more = 0;
  for (int b = 0; b < 256; ++b) {
    if (mismatch_by_scale[b] == 0) continue;
    if (shown >= kMaxListed) {
      ++more;
      continue;
    }
    o << (shown++ % 6 == 0 ? "\n    " : "  ") << "byte " << b << ": " << mismatch_by_scale[b] << "/"
      << checked_by_scale[b] << " [" << subnormal_ref_by_scale[b] << "]";
  }
  if (more > 0) o << "\n    ... and " << more << " more bytes";
  o << "\n  value codes with mismatches (count):";
  shown = 0;
  more = 0;
  for (int v = 0; v < 256; ++v) {
    if (mismatch_by_value[v] == 0) continue;
    if (shown >= 2 * kMaxListed) {
      ++more;
      continue;
    }
    o << (shown++ % 10 == 0 ? "\n    " : " ") << hex2(static_cast<unsigned>(v)) << "(" << mismatch_by_value[v]
      << ")";
  }
  if (more > 0) o << "\n    ... and " << more << " more codes";
  o << "\n  examples:";
  for (const auto& e : examples) o << "\n    " << e;
  if (mismatches > examples.size()) o << "\n    ...";
  return o.str();
}

std::string IdentityReport::nan_details() const {
  std::ostringstream o;
  o << nan_expected << " elements of NaN columns checked; " << nan_missing_direct
    << " not NaN in the row whose unit vector hits the NaN weight (dequant is NaN there), " << nan_missing_indirect
    << " not NaN in the other rows (0 * NaN = NaN in the FP32 accumulation)";
  for (const auto& e : nan_examples) o << "\n    " << e;
  if (nan_missing_direct + nan_missing_indirect > nan_examples.size()) o << "\n    ...";
  return o.str();
}

std::string IdentityReport::rope_details() const {
  std::ostringstream o;
  o << rope_mismatches << " of " << rope_checked << " RoPE elements are not bitwise q_pe";
  for (const auto& e : rope_examples) o << "\n    " << e;
  if (rope_mismatches > rope_examples.size()) o << "\n    ...";
  return o.str();
}

IdentityReport check_identity(const MxWeights& w, const std::vector<uint16_t>& q, int R, int row0, int M,
                              const uint16_t* out, int out_pitch) {
  const int H = w.H(), K = w.K(), N = MxWeights::kN;
  // Columns (h, n) holding a NaN somewhere in K: NaN in every row of the result.
  std::vector<uint8_t> nan_col(static_cast<size_t>(H) * N, 0);
  for (int h = 0; h < H; ++h)
    for (int k = 0; k < K; ++k)
      for (int n = 0; n < N; ++n)
        if (bf16_is_nan(w.dequant(h, k, n))) nan_col[static_cast<size_t>(h) * N + n] = 1;

  const size_t rows = static_cast<size_t>(M) * H;
  std::vector<IdentityReport> parts(hardware_threads() + 1);
  parallel_for(rows, [&](size_t b, size_t e, unsigned chunk) {
    IdentityReport& r = parts[chunk];
    for (size_t mh = b; mh < e; ++mh) {
      const int m = static_cast<int>(mh / H), h = static_cast<int>(mh % H);
      const int qrow = row0 + m;
      const int k = qrow % K;
      const uint16_t* orow = out + mh * static_cast<size_t>(out_pitch);
      for (int n = 0; n < N; ++n) {
        const uint16_t got = orow[n];
        const uint8_t vb = w.value(h, k, n), sb = w.scale(h, k, n / 32);
        const uint16_t want = dequant_mxfp8(vb, sb);
        const bool direct = bf16_is_nan(want);
        auto where = [&] {
          std::ostringstream o;
          o << "out[m=" << m << " (q row " << qrow << " = e_" << k << "), h=" << h << ", n=" << n << "] = "
            << hex4(got) << " (" << bf16_to_float(got) << ")";
          return o.str();
        };
        if (nan_col[static_cast<size_t>(h) * N + n]) {
          ++r.nan_expected;
          if (!bf16_is_nan(got)) {
            ++(direct ? r.nan_missing_direct : r.nan_missing_indirect);
            if (r.nan_examples.size() < static_cast<size_t>(kMaxExamples)) {
              r.nan_examples.push_back(where() + ", want NaN (" +
                                       (direct ? std::string("w[h,k,n]: value ") + hex2(vb) + ", scale byte " +
                                                     std::to_string(sb)
                                               : std::string("0 * NaN from another K row of this column")) +
                                       ")");
            }
          }
          continue;
        }
        ++r.checked;
        ++r.checked_by_scale[sb];
        const bool sub = bf16_is_subnormal(want);
        if (sub) {
          ++r.ref_subnormal_checked;
          ++r.subnormal_ref_by_scale[sb];
        }
        if (got == want) {
          ++r.exact;
          continue;
        }
        if (bf16_is_zero(want) && bf16_is_zero(got)) {
          ++r.zero_sign_accepted;
          continue;
        }
        ++r.mismatches;
        ++r.mismatch_by_scale[sb];
        ++r.mismatch_by_value[vb];
        if (sub) {
          ++r.ref_subnormal_mismatches;
          if (bf16_is_zero(got)) ++r.flushed_to_zero;
        }
        if (r.examples.size() < static_cast<size_t>(kMaxExamples)) {
          std::ostringstream o;
          o << where() << ", want " << hex4(want) << " (" << bf16_to_float(want) << (sub ? ", subnormal" : "")
            << ") = dequant(value " << hex2(vb) << " = " << e4m3_to_float(vb) << ", scale byte "
            << static_cast<unsigned>(sb) << " = 2^" << (static_cast<int>(sb) - 127) << ")";
          r.examples.push_back(o.str());
        }
      }
      const uint16_t* qpe = q.data() + (static_cast<size_t>(qrow) * H + h) * static_cast<size_t>(K + R) + K;
      for (int j = 0; j < R; ++j) {
        ++r.rope_checked;
        if (orow[N + j] != qpe[j]) {
          ++r.rope_mismatches;
          if (r.rope_examples.size() < static_cast<size_t>(kMaxExamples)) {
            std::ostringstream o;
            o << "rope out[m=" << m << ", h=" << h << ", c=" << (N + j) << "] = " << hex4(orow[N + j])
              << ", q_pe = " << hex4(qpe[j]);
            r.rope_examples.push_back(o.str());
          }
        }
      }
    }
  });
  IdentityReport total;
  for (const IdentityReport& p : parts) total.merge(p);
  total.runs = 1;
  return total;
}

}  // namespace spark_gpu

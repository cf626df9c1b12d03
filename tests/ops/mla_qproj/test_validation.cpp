// Argument checking of the C API, without a GPU.
//
// spark_mla_qproj_can_implement is a pure host check that never dereferences the
// tensor pointers, so every case below uses fake (but well-aligned, non-overlapping)
// device addresses.  One mutation of a valid baseline at a time, each case asserts the
// exact status and that spark_last_error() names the argument (spark.h's rules and docs/c-api.md).
// The tests pass on a machine with or without a GPU.

#include <doctest/doctest.h>

#include <atomic>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "ops/mla_qproj/validate.h"
#include "spark/spark.h"

namespace {

// ----------------------------------------------------------------------------------
// Fake device addresses: one region per tensor, 64 GiB apart, all 4 KiB aligned.
// ----------------------------------------------------------------------------------
constexpr uintptr_t kQAddr = 0x7f0000000000ull;      // q [M, H, K+R] bf16 (q_nope and q_pe)
constexpr uintptr_t kWAddr = 0x7f1000000000ull;      // w pack [H, K+256, N]
constexpr uintptr_t kWScaleAddr = 0x7f2000000000ull; // w_scale: MXFP8 [H, K+256, N/32]; block FP8 [blocks, N/128]
constexpr uintptr_t kOutAddr = 0x7f3000000000ull;    // out [M, H, 584]
constexpr uintptr_t kQScaleAddr = 0x7f4000000000ull; // q_scale (fp32 scalar)

constexpr int kN = 512;
constexpr int kR = 64;
constexpr int kOutPitch = 584;  // out_stride_h: a 576-wide view inside 584-wide rows

const void* addr(uintptr_t a) { return reinterpret_cast<const void*>(a); }
void* mut_addr(uintptr_t a) { return reinterpret_cast<void*>(a); }
uintptr_t as_int(const void* p) { return reinterpret_cast<uintptr_t>(p); }

struct Config {
  int heads = 16;
  int nope = 192;
  int m = 64;
  spark_weight_format weights = SPARK_WEIGHTS_BF16;
  spark_dtype out = SPARK_DTYPE_BF16;
};

Config bf16_out() { return Config{}; }
Config e4m3_out() {
  Config c;
  c.out = SPARK_DTYPE_E4M3;
  return c;
}
Config mxfp8(spark_dtype out = SPARK_DTYPE_BF16) {
  Config c;
  c.weights = SPARK_WEIGHTS_MXFP8;
  c.out = out;
  return c;
}
Config fp8_block(spark_dtype out = SPARK_DTYPE_BF16) {
  Config c;
  c.weights = SPARK_WEIGHTS_FP8_BLOCK128;
  c.out = out;
  return c;
}
bool is_fp8(const Config& c) { return c.weights != SPARK_WEIGHTS_BF16; }

spark_mla_qproj_desc make_desc(const Config& c) {
  spark_mla_qproj_desc d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.heads = c.heads;
  d.nope_dim = c.nope;
  d.latent_dim = kN;
  d.rope_dim = kR;
  d.weight_format = c.weights;
  d.out_dtype = c.out;
  return d;
}

// The server layout: q token-major [M, H, K+R] (q_nope = q[..., :K], q_pe = q[..., K:]),
// w sliced from a [H, K+256, N] kv_b pack, out pitched (584 per head).
spark_mla_qproj_args make_args(const Config& c) {
  const int64_t H = c.heads, K = c.nope, qrow = K + kR, pack_rows = K + 256;
  spark_mla_qproj_args a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.m = c.m;
  a.q_nope = addr(kQAddr);
  a.q_nope_stride_h = qrow;
  a.q_nope_stride_m = H * qrow;
  a.w = addr(kWAddr);
  a.w_stride_h = pack_rows * kN;
  a.w_stride_k = kN;
  if (c.weights == SPARK_WEIGHTS_MXFP8) {
    a.w_scale = addr(kWScaleAddr);
    a.w_scale_stride_h = pack_rows * (kN / 32);
    a.w_scale_stride_k = kN / 32;
  } else if (c.weights == SPARK_WEIGHTS_FP8_BLOCK128) {
    a.w_scale = addr(kWScaleAddr);  // the pack's weight_scale_inv [ceil(H * (K+256) / 128), N/128]
    a.w_scale_stride_h = pack_rows;
    a.w_scale_stride_k = kN / 128;
  }
  a.q_pe = addr(kQAddr + 2 * K);  // q + K bf16 elements
  a.q_pe_stride_m = H * qrow;
  a.q_pe_stride_h = qrow;
  a.out = mut_addr(kOutAddr);
  a.out_stride_h = kOutPitch;
  a.out_stride_m = H * kOutPitch;
  a.q_scale = c.out == SPARK_DTYPE_E4M3 ? reinterpret_cast<const float*>(kQScaleAddr) : nullptr;
  return a;
}

// Byte range [begin, end) spanned by a strided view: the last element's offset + 1.
struct Range {
  uintptr_t begin, end;
};
bool overlaps(Range a, Range b) { return a.begin < b.end && b.begin < a.end; }

Range span(const void* base, int elem_bytes, int64_t n0, int64_t s0, int64_t n1, int64_t s1,
           int64_t inner) {
  const uintptr_t b = as_int(base);
  const int64_t last = (n0 - 1) * s0 + (n1 - 1) * s1 + inner;  // one past the last element
  return Range{b, b + static_cast<uintptr_t>(last * elem_bytes)};
}

struct Spans {
  Range q_nope, q_pe, w, w_scale, out, q_scale;
  bool has_w_scale, has_q_scale;
};

Spans spans(const Config& c, const spark_mla_qproj_args& a) {
  const int wbytes = is_fp8(c) ? 1 : 2;
  const int obytes = c.out == SPARK_DTYPE_E4M3 ? 1 : 2;
  Spans s{};
  s.q_nope = span(a.q_nope, 2, c.heads, a.q_nope_stride_h, a.m, a.q_nope_stride_m, c.nope);
  s.q_pe = span(a.q_pe, 2, a.m, a.q_pe_stride_m, c.heads, a.q_pe_stride_h, kR);
  s.w = span(a.w, wbytes, c.heads, a.w_stride_h, c.nope, a.w_stride_k, kN);
  s.out = span(a.out, obytes, a.m, a.out_stride_m, c.heads, a.out_stride_h, kN + kR);
  s.has_w_scale = a.w_scale != nullptr;
  if (s.has_w_scale && c.weights == SPARK_WEIGHTS_MXFP8)
    s.w_scale = span(a.w_scale, 1, c.heads, a.w_scale_stride_h, c.nope, a.w_scale_stride_k, kN / 32);
  if (s.has_w_scale && c.weights == SPARK_WEIGHTS_FP8_BLOCK128) {
    const int64_t block_rows = ((c.heads - 1) * a.w_scale_stride_h + c.nope - 1) / 128 + 1;
    s.w_scale = span(a.w_scale, 4, block_rows, a.w_scale_stride_k, 1, 0, kN / 128);
  }
  s.has_q_scale = a.q_scale != nullptr;
  if (s.has_q_scale) s.q_scale = Range{as_int(a.q_scale), as_int(a.q_scale) + 4};
  return s;
}

// ----------------------------------------------------------------------------------
// Message matching.
// ----------------------------------------------------------------------------------
bool is_ident(char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; }

// `word` occurs in `s` as a whole identifier ("w" matches "argument 'w':" but not "w_stride_k").
bool contains_word(const std::string& s, const std::string& word) {
  for (size_t pos = s.find(word); pos != std::string::npos; pos = s.find(word, pos + 1)) {
    const bool left_ok = pos == 0 || !is_ident(s[pos - 1]);
    const size_t end = pos + word.size();
    const bool right_ok = end >= s.size() || !is_ident(s[end]);
    if (left_ok && right_ok) return true;
  }
  return false;
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}
bool icontains(const std::string& s, const std::string& sub) {
  return lower(s).find(lower(sub)) != std::string::npos;
}

struct Result {
  spark_status status;
  std::string message;
};

Result can_implement(const spark_mla_qproj_desc* d, const spark_mla_qproj_args* a) {
  Result r;
  r.status = spark_mla_qproj_can_implement(d, a);
  const char* msg = spark_last_error();
  r.message = msg ? msg : "<spark_last_error returned NULL>";
  return r;
}

std::string last_error() {
  const char* msg = spark_last_error();
  return msg ? msg : "<spark_last_error returned NULL>";
}

std::string status_name(spark_status s) {
  const char* n = spark_status_string(s);
  return n ? n : "<NULL>";
}

// Expects `expect` and a message naming `name` (whole identifier).
void check_failure(const Result& r, spark_status expect, const std::string& name) {
  INFO("status: " << static_cast<int>(r.status) << " (" << status_name(r.status) << "), message: \""
                  << r.message << "\"");
  CHECK(r.status == expect);
  CHECK_MESSAGE(contains_word(r.message, name), "the message does not name '" << name << "'");
}

void check_success(const Result& r) {
  INFO("status: " << static_cast<int>(r.status) << " (" << status_name(r.status) << "), message: \""
                  << r.message << "\"");
  CHECK(r.status == SPARK_SUCCESS);
}

// ----------------------------------------------------------------------------------
// A table of mutations of a valid baseline.
// ----------------------------------------------------------------------------------
using Mutate = std::function<void(spark_mla_qproj_desc&, spark_mla_qproj_args&)>;

enum Extra { kNone = 0, kAlignHint = 1, kOverlapHint = 2, kAddressSpaceHint = 4 };

struct Mutation {
  std::string label;
  Mutate apply;
  spark_status expect;
  std::string name;  // the argument the message must name
  int extra = kNone;
};

// lenient: the configuration is not implemented yet (UNSUPPORTED is then accepted too).
void run_mutations(const Config& cfg, const std::vector<Mutation>& table, bool lenient = false) {
  for (const Mutation& mu : table) {
    spark_mla_qproj_desc d = make_desc(cfg);
    spark_mla_qproj_args a = make_args(cfg);
    mu.apply(d, a);
    const Result r = can_implement(&d, &a);
    INFO("case: " << mu.label);
    INFO("status: " << static_cast<int>(r.status) << " (" << status_name(r.status)
                    << "), message: \"" << r.message << "\"");
    if (lenient && r.status == SPARK_ERROR_UNSUPPORTED) continue;
    if (mu.expect == SPARK_SUCCESS) {
      CHECK(r.status == SPARK_SUCCESS);
      continue;
    }
    CHECK(r.status == mu.expect);
    CHECK_MESSAGE(contains_word(r.message, mu.name), "the message does not name '" << mu.name << "'");
    if (mu.extra & kAlignHint)
      CHECK_MESSAGE((icontains(r.message, "align") || r.message.find("16") != std::string::npos),
                    "the message does not mention the alignment");
    if (mu.extra & kOverlapHint)
      CHECK_MESSAGE(icontains(r.message, "overlap"), "the message does not mention the overlap");
    if (mu.extra & kAddressSpaceHint)
      CHECK_MESSAGE(icontains(r.message, "address space"), "the message does not mention the address space");
  }
}

Mutation invalid(std::string label, Mutate f, std::string name, int extra = kNone) {
  return Mutation{std::move(label), std::move(f), SPARK_ERROR_INVALID_ARGUMENT, std::move(name), extra};
}
Mutation unsupported(std::string label, Mutate f, std::string name) {
  return Mutation{std::move(label), std::move(f), SPARK_ERROR_UNSUPPORTED, std::move(name), kNone};
}
Mutation valid(std::string label, Mutate f) {
  return Mutation{std::move(label), std::move(f), SPARK_SUCCESS, "", kNone};
}

struct StrideField {
  const char* name;
  int64_t spark_mla_qproj_args::*member;
};
const StrideField kStrides[] = {
    {"q_nope_stride_h", &spark_mla_qproj_args::q_nope_stride_h},
    {"q_nope_stride_m", &spark_mla_qproj_args::q_nope_stride_m},
    {"w_stride_h", &spark_mla_qproj_args::w_stride_h},
    {"w_stride_k", &spark_mla_qproj_args::w_stride_k},
    {"q_pe_stride_m", &spark_mla_qproj_args::q_pe_stride_m},
    {"q_pe_stride_h", &spark_mla_qproj_args::q_pe_stride_h},
    {"out_stride_m", &spark_mla_qproj_args::out_stride_m},
    {"out_stride_h", &spark_mla_qproj_args::out_stride_h},
};

// The mutations that apply to every bf16-weight configuration (bf16 or e4m3 output).
std::vector<Mutation> common_mutations(const Config& cfg) {
  std::vector<Mutation> t;

  // m: 1 <= m <= 8192.
  t.push_back(invalid("m = 0", [](auto&, auto& a) { a.m = 0; }, "m"));
  t.push_back(invalid("m = -1", [](auto&, auto& a) { a.m = -1; }, "m"));
  t.push_back(invalid("m = 8193", [](auto&, auto& a) { a.m = 8193; }, "m"));
  t.push_back(valid("m = 1", [](auto&, auto& a) { a.m = 1; }));
  t.push_back(valid("m = 8192", [](auto&, auto& a) { a.m = 8192; }));

  // NULL tensors.
  t.push_back(invalid("q_nope NULL", [](auto&, auto& a) { a.q_nope = nullptr; }, "q_nope"));
  t.push_back(invalid("w NULL", [](auto&, auto& a) { a.w = nullptr; }, "w"));
  t.push_back(invalid("q_pe NULL", [](auto&, auto& a) { a.q_pe = nullptr; }, "q_pe"));
  t.push_back(invalid("out NULL", [](auto&, auto& a) { a.out = nullptr; }, "out"));

  // Base pointers must be 16-byte aligned.
  t.push_back(invalid("q_nope + 2 bytes",
                      [](auto&, auto& a) { a.q_nope = addr(as_int(a.q_nope) + 2); }, "q_nope",
                      kAlignHint));
  t.push_back(invalid("w + 2 bytes", [](auto&, auto& a) { a.w = addr(as_int(a.w) + 2); }, "w",
                      kAlignHint));
  t.push_back(invalid("q_pe + 2 bytes", [](auto&, auto& a) { a.q_pe = addr(as_int(a.q_pe) + 2); },
                      "q_pe", kAlignHint));
  t.push_back(invalid("out + 2 bytes",
                      [](auto&, auto& a) { a.out = mut_addr(as_int(a.out) + 2); }, "out",
                      kAlignHint));
  t.push_back(invalid("out + 8 bytes",
                      [](auto&, auto& a) { a.out = mut_addr(as_int(a.out) + 8); }, "out",
                      kAlignHint));

  // Every stride: > 0 and a multiple of 8 elements.
  for (const StrideField& s : kStrides) {
    const auto mem = s.member;
    const int64_t base = make_args(cfg).*mem;
    t.push_back(invalid(std::string(s.name) + " = 0", [mem](auto&, auto& a) { a.*mem = 0; }, s.name));
    t.push_back(invalid(std::string(s.name) + " = -8", [mem](auto&, auto& a) { a.*mem = -8; }, s.name));
    t.push_back(invalid(std::string(s.name) + " = -" + std::to_string(base),
                        [mem, base](auto&, auto& a) { a.*mem = -base; }, s.name));
    t.push_back(invalid(std::string(s.name) + " = " + std::to_string(base + 1),
                        [mem, base](auto&, auto& a) { a.*mem = base + 1; }, s.name));
    t.push_back(invalid(std::string(s.name) + " = " + std::to_string(base + 4),
                        [mem, base](auto&, auto& a) { a.*mem = base + 4; }, s.name));
  }

  // Rows overlapping inside one tensor (strides positive and multiples of 8).
  t.push_back(invalid("w_stride_k = 256 < N", [](auto&, auto& a) { a.w_stride_k = 256; }, "w_stride_k"));
  t.push_back(invalid("out_stride_h = 568 < N+R", [](auto&, auto& a) { a.out_stride_h = 568; },
                      "out_stride_h"));
  // K = 192: q_nope_stride_h = 128; K = 128: 64.
  t.push_back(invalid("q_nope_stride_h = K - 64 < K",
                      [](auto& d, auto& a) { a.q_nope_stride_h = d.nope_dim - 64; }, "q_nope_stride_h"));
  t.push_back(invalid("q_nope_stride_m = K - 8 < K",
                      [](auto& d, auto& a) { a.q_nope_stride_m = d.nope_dim - 8; }, "q_nope_stride_m"));
  t.push_back(invalid("q_pe_stride_h = 56 < R", [](auto&, auto& a) { a.q_pe_stride_h = 56; },
                      "q_pe_stride_h"));
  t.push_back(invalid("out_stride_m = 568 < N+R", [](auto&, auto& a) { a.out_stride_m = 568; },
                      "out_stride_m"));
  // Exactly the row width is fine.
  t.push_back(valid("out_stride_h = 576 (== N+R)", [](auto& d, auto& a) {
    a.out_stride_h = 576;
    a.out_stride_m = int64_t{d.heads} * 576;
  }));
  t.push_back(valid("w_stride_k = 512 (== N), w_stride_h = K*N (unpitched)", [](auto& d, auto& a) {
    a.w_stride_k = 512;
    a.w_stride_h = int64_t{d.nope_dim} * 512;
  }));

  // bf16 weights take no scales.
  t.push_back(invalid("bf16 weights with w_scale", [](auto&, auto& a) { a.w_scale = addr(kWScaleAddr); },
                      "w_scale"));

  // out must not overlap any input.
  t.push_back(invalid("out == q (q_nope base)", [](auto&, auto& a) { a.out = mut_addr(as_int(a.q_nope)); },
                      "out", kOverlapHint));
  t.push_back(invalid("out inside w", [](auto&, auto& a) { a.out = mut_addr(as_int(a.w) + 4096); },
                      "out", kOverlapHint));
  t.push_back(invalid("out ending inside q (before it)",
                      [cfg](auto&, auto& a) {
                        // out's last row ends 64 bytes into q.
                        const Spans s = spans(cfg, a);
                        const uintptr_t len = s.out.end - s.out.begin;
                        a.out = mut_addr(((kQAddr + 64 - len) & ~uintptr_t{15}) + 16);
                      },
                      "out", kOverlapHint));
  {
    // out placed right after q_nope's span but inside q_pe's (q_pe's last row
    // reaches 2*R bytes past the end of q_nope's).
    spark_mla_qproj_args a0 = make_args(cfg);
    const Spans s = spans(cfg, a0);
    const uintptr_t start = (s.q_nope.end + 15) & ~uintptr_t{15};
    REQUIRE(start >= s.q_nope.end);
    REQUIRE(start < s.q_pe.end);
    t.push_back(invalid("out overlapping q_pe only", [start](auto&, auto& a) { a.out = mut_addr(start); },
                        "out", kOverlapHint));
    // out starting exactly where q (q_pe's span) ends: adjacent, not overlapping.
    const uintptr_t after = s.q_pe.end;
    REQUIRE(after % 16 == 0);
    t.push_back(valid("out adjacent to q_pe's end", [after](auto&, auto& a) { a.out = mut_addr(after); }));
    // out ending exactly where q begins.
    const uintptr_t len = s.out.end - s.out.begin;
    const uintptr_t before = kQAddr - ((len + 15) & ~uintptr_t{15});
    t.push_back(valid("out ending before q", [before](auto&, auto& a) { a.out = mut_addr(before); }));
  }
  return t;
}

}  // namespace

TEST_CASE("out's rows (m, h) must not overlap each other") {
  // Baseline H = 16, M = 64, out_stride_h = 584, out_stride_m = 16 * 584.
  for (const Config& c : {bf16_out(), e4m3_out()}) {
    run_mutations(
        c, {
               invalid("out_stride_m == out_stride_h = 584 (row (1, 0) is row (0, 1))",
                       [](auto&, auto& a) { a.out_stride_m = 584; }, "out_stride_m", kOverlapHint),
               invalid("out_stride_m = 15 * 584 + 568: the last head runs into the next token",
                       [](auto&, auto& a) { a.out_stride_m = 15 * 584 + 568; }, "out_stride_m", kOverlapHint),
               valid("out_stride_m = 15 * 584 + 576: exactly past the last head",
                     [](auto&, auto& a) { a.out_stride_m = 15 * 584 + 576; }),
               invalid("head-major out with out_stride_h = 63 * 584 + 568",
                       [](auto&, auto& a) {
                         a.out_stride_m = 584;
                         a.out_stride_h = 63 * 584 + 568;
                       },
                       "out_stride_h", kOverlapHint),
               valid("head-major out: out_stride_m = 584, out_stride_h = 64 * 584",
                     [](auto&, auto& a) {
                       a.out_stride_m = 584;
                       a.out_stride_h = 64 * 584;
                     }),
               valid("m = 1: out_stride_m is never stepped",
                     [](auto&, auto& a) {
                       a.m = 1;
                       a.out_stride_m = 584;
                     }),
           });
  }
  Config one_head = bf16_out();
  one_head.heads = 1;
  run_mutations(one_head, {valid("H = 1: out_stride_h is never stepped", [](auto&, auto& a) {
                  a.out_stride_h = 576;
                  a.out_stride_m = 576;
                })});
}

// ==================================================================================
// Baselines
// ==================================================================================

TEST_CASE("the baselines are self-consistent (test fixture check)") {
  for (const Config& c : {bf16_out(), e4m3_out(), mxfp8(), mxfp8(SPARK_DTYPE_E4M3), fp8_block(),
                          fp8_block(SPARK_DTYPE_E4M3)}) {
    const spark_mla_qproj_args a = make_args(c);
    const Spans s = spans(c, a);
    CHECK_FALSE(overlaps(s.out, s.q_nope));
    CHECK_FALSE(overlaps(s.out, s.q_pe));
    CHECK_FALSE(overlaps(s.out, s.w));
    if (s.has_w_scale) CHECK_FALSE(overlaps(s.out, s.w_scale));
    if (s.has_q_scale) CHECK_FALSE(overlaps(s.out, s.q_scale));
    // Every region stays inside its own 64 GiB slot.
    CHECK(s.q_pe.end < kWAddr);
    CHECK(s.w.end < kWScaleAddr);
    CHECK(s.out.end < kQScaleAddr);
  }
}

TEST_CASE("valid baselines are accepted") {
  SUBCASE("bf16 weights, bf16 out, H=16 K=192 M=64") {
    const Config c = bf16_out();
    const auto d = make_desc(c);
    const auto a = make_args(c);
    check_success(can_implement(&d, nullptr));
    check_success(can_implement(&d, &a));
  }
  SUBCASE("bf16 weights, e4m3 out with q_scale") {
    const Config c = e4m3_out();
    const auto d = make_desc(c);
    const auto a = make_args(c);
    check_success(can_implement(&d, nullptr));
    check_success(can_implement(&d, &a));
  }
  SUBCASE("supported heads and nope_dim") {
    for (int heads : {1, 8, 11, 16, 32, 64, 128}) {
      for (int nope : {128, 192}) {
        for (const spark_dtype out : {SPARK_DTYPE_BF16, SPARK_DTYPE_E4M3}) {
          Config c;
          c.heads = heads;
          c.nope = nope;
          c.out = out;
          INFO("heads " << heads << ", nope_dim " << nope << ", out_dtype " << static_cast<int>(out));
          const auto d = make_desc(c);
          const auto a = make_args(c);
          check_success(can_implement(&d, nullptr));
          check_success(can_implement(&d, &a));
        }
      }
    }
  }
  SUBCASE("e4m3 out: out_stride_h = 584 is a multiple of 8") {
    const Config c = e4m3_out();
    const auto d = make_desc(c);
    auto a = make_args(c);
    REQUIRE(a.out_stride_h == 584);
    check_success(can_implement(&d, &a));
  }
}

// ==================================================================================
// Descriptor
// ==================================================================================

TEST_CASE("null and mis-sized structs") {
  const Config c = bf16_out();
  spark_mla_qproj_desc d = make_desc(c);
  spark_mla_qproj_args a = make_args(c);

  check_failure(can_implement(nullptr, nullptr), SPARK_ERROR_INVALID_ARGUMENT, "desc");
  check_failure(can_implement(nullptr, &a), SPARK_ERROR_INVALID_ARGUMENT, "desc");

  for (size_t size : {size_t{0}, size_t{1}, sizeof(spark_mla_qproj_desc) - 1,
                      offsetof(spark_mla_qproj_desc, out_dtype)}) {
    INFO("desc.struct_size = " << size);
    spark_mla_qproj_desc bad = d;
    bad.struct_size = size;
    check_failure(can_implement(&bad, nullptr), SPARK_ERROR_INVALID_ARGUMENT, "struct_size");
    check_failure(can_implement(&bad, &a), SPARK_ERROR_INVALID_ARGUMENT, "struct_size");
  }
  for (size_t size : {size_t{0}, size_t{1}, sizeof(spark_mla_qproj_args) - 1,
                      offsetof(spark_mla_qproj_args, q_scale)}) {
    INFO("args.struct_size = " << size);
    spark_mla_qproj_args bad = a;
    bad.struct_size = size;
    check_failure(can_implement(&d, &bad), SPARK_ERROR_INVALID_ARGUMENT, "struct_size");
  }
}

TEST_CASE("unsupported shapes name the field") {
  const std::vector<Mutation> table = {
      unsupported("heads = 0", [](auto& d, auto&) { d.heads = 0; }, "heads"),
      unsupported("heads = 129", [](auto& d, auto&) { d.heads = 129; }, "heads"),
      unsupported("heads = -1", [](auto& d, auto&) { d.heads = -1; }, "heads"),
      unsupported("nope_dim = 64", [](auto& d, auto&) { d.nope_dim = 64; }, "nope_dim"),
      unsupported("nope_dim = 256", [](auto& d, auto&) { d.nope_dim = 256; }, "nope_dim"),
      unsupported("latent_dim = 256", [](auto& d, auto&) { d.latent_dim = 256; }, "latent_dim"),
      unsupported("rope_dim = 32", [](auto& d, auto&) { d.rope_dim = 32; }, "rope_dim"),
      invalid("weight_format = 7",
              [](auto& d, auto&) { d.weight_format = static_cast<spark_weight_format>(7); },
              "weight_format"),
      invalid("out_dtype = 9", [](auto& d, auto&) { d.out_dtype = static_cast<spark_dtype>(9); },
              "out_dtype"),
  };
  // With the baseline args ...
  run_mutations(bf16_out(), table);
  // ... and without args (descriptor-only check).
  for (const Mutation& mu : table) {
    INFO("case (desc only): " << mu.label);
    spark_mla_qproj_desc d = make_desc(bf16_out());
    spark_mla_qproj_args unused = make_args(bf16_out());
    mu.apply(d, unused);
    check_failure(can_implement(&d, nullptr), mu.expect, mu.name);
  }
}

// The C enum fields hold whatever int the caller stored.  Written here byte-wise, as C code
// would leave them: no enum-typed value outside the enumerators exists on this side either.
void store_int32(void* field, int32_t value) { std::memcpy(field, &value, sizeof value); }

TEST_CASE("out-of-range weight_format and out_dtype values are refused, read as integers") {
  // spark must read these fields as integers: loading one through the C++ enum type is
  // undefined behaviour for a value outside the enumerators (clang's -fsanitize=enum, part
  // of -fsanitize=undefined, stops this test at the load).
  static_assert(sizeof(spark_weight_format) == sizeof(int32_t) && sizeof(spark_dtype) == sizeof(int32_t));
  for (const int32_t v : {2, 3, 7, 255, 256, -1, -2, INT32_MIN, INT32_MAX}) {
    CAPTURE(v);
    const Config c = bf16_out();
    const spark_mla_qproj_args a = make_args(c);
    spark_mla_qproj_desc d = make_desc(c);
    store_int32(&d.weight_format, v == 2 ? 3 : v);  // 2 is SPARK_WEIGHTS_FP8_BLOCK128
    for (const spark_mla_qproj_args* args : {&a, static_cast<const spark_mla_qproj_args*>(nullptr)}) {
      const Result r = can_implement(&d, args);
      check_failure(r, SPARK_ERROR_INVALID_ARGUMENT, "weight_format");
      CHECK(r.message.find(std::to_string(v == 2 ? 3 : v)) != std::string::npos);
    }
    d = make_desc(c);
    store_int32(&d.out_dtype, v);
    for (const spark_mla_qproj_args* args : {&a, static_cast<const spark_mla_qproj_args*>(nullptr)}) {
      const Result r = can_implement(&d, args);
      check_failure(r, SPARK_ERROR_INVALID_ARGUMENT, "out_dtype");
      CHECK(r.message.find(std::to_string(v)) != std::string::npos);
    }
  }
}

TEST_CASE("a view running past the end of the address space is refused, naming it") {
  // A span [base, base + extent) computed in 64 bits wraps to a small end there, and the
  // overlap check then passed views that overlap (or were never real).
  constexpr uintptr_t kTop = ~uintptr_t{0};
  const uintptr_t top16 = (kTop - 0xffff) & ~uintptr_t{15};  // 64 KiB below the top, 16-byte aligned
  for (const Config& c : {bf16_out(), e4m3_out()}) {
    run_mutations(c, {
        invalid("out 64 KiB below the top", [top16](auto&, auto& a) { a.out = mut_addr(top16); }, "out",
                kAddressSpaceHint),
        invalid("out at the last 16 bytes", [](auto&, auto& a) { a.out = mut_addr(kTop - 15); }, "out",
                kAddressSpaceHint),
        invalid("q_nope 64 KiB below the top", [top16](auto&, auto& a) { a.q_nope = addr(top16); }, "q_nope",
                kAddressSpaceHint),
        invalid("w 64 KiB below the top", [top16](auto&, auto& a) { a.w = addr(top16); }, "w",
                kAddressSpaceHint),
        invalid("q_pe 64 KiB below the top", [top16](auto&, auto& a) { a.q_pe = addr(top16); }, "q_pe",
                kAddressSpaceHint),
        // Far enough below the top for the whole view: fine.
        valid("out 1 GiB below the top",
              [](auto&, auto& a) { a.out = mut_addr((kTop - (uintptr_t{1} << 30)) & ~uintptr_t{15}); }),
    });
  }
  run_mutations(e4m3_out(), {invalid("q_scale in the last 4 bytes",
                                     [](auto&, auto& a) {
                                       a.q_scale = reinterpret_cast<const float*>(kTop - 3);
                                     },
                                     "q_scale", kAddressSpaceHint)});
  run_mutations(mxfp8(), {invalid("w_scale 64 KiB below the top",
                                  [top16](auto&, auto& a) { a.w_scale = addr(top16); }, "w_scale",
                                  kAddressSpaceHint)});
  // The view that wrapped around onto q: refused, whichever way it is put.
  const Config c = bf16_out();
  const spark_mla_qproj_desc d = make_desc(c);
  spark_mla_qproj_args a = make_args(c);
  a.q_nope = addr(0x1000);
  a.q_pe = addr(0x1000 + 2 * 192);
  a.out = mut_addr(top16);
  const Result r = can_implement(&d, &a);
  check_failure(r, SPARK_ERROR_INVALID_ARGUMENT, "out");
}

// ==================================================================================
// Arguments
// ==================================================================================

TEST_CASE("argument rules, bf16 weights, bf16 out") { run_mutations(bf16_out(), common_mutations(bf16_out())); }

TEST_CASE("argument rules, bf16 weights, e4m3 out") { run_mutations(e4m3_out(), common_mutations(e4m3_out())); }

TEST_CASE("argument rules, H = 128, K = 128") {
  Config c;
  c.heads = 128;
  c.nope = 128;
  run_mutations(c, common_mutations(c));
}

TEST_CASE("q_scale: required for e4m3 output, ignored for bf16 output, 4-byte aligned") {
  run_mutations(bf16_out(),
                {
                    valid("bf16 out with q_scale",
                          [](auto&, auto& a) { a.q_scale = reinterpret_cast<const float*>(kQScaleAddr); }),
                    valid("bf16 out with a misaligned q_scale",
                          [](auto&, auto& a) { a.q_scale = reinterpret_cast<const float*>(kQScaleAddr + 1); }),
                    valid("bf16 out with q_scale inside out",
                          [](auto&, auto& a) { a.q_scale = reinterpret_cast<const float*>(as_int(a.out) + 64); }),
                });
  run_mutations(e4m3_out(),
                {
                    invalid("e4m3 out without q_scale", [](auto&, auto& a) { a.q_scale = nullptr; }, "q_scale"),
                    invalid("q_scale + 2 bytes",
                            [](auto&, auto& a) { a.q_scale = reinterpret_cast<const float*>(kQScaleAddr + 2); },
                            "q_scale"),
                    invalid("q_scale + 1 byte",
                            [](auto&, auto& a) { a.q_scale = reinterpret_cast<const float*>(kQScaleAddr + 1); },
                            "q_scale"),
                    valid("q_scale + 4 bytes",
                          [](auto&, auto& a) { a.q_scale = reinterpret_cast<const float*>(kQScaleAddr + 4); }),
                    invalid("out_stride_h = 580 (not a multiple of 8)",
                            [](auto&, auto& a) { a.out_stride_h = 580; }, "out_stride_h"),
                    valid("out_stride_h = 584", [](auto&, auto& a) { a.out_stride_h = 584; }),
                    invalid("out starting at q_scale",
                            [](auto&, auto& a) { a.out = mut_addr(kQScaleAddr); }, "out", kOverlapHint),
                    invalid("q_scale inside out",
                            [](auto&, auto& a) {
                              a.q_scale = reinterpret_cast<const float*>(as_int(a.out) + 64);
                            },
                            "out", kOverlapHint),
                });
}

// ==================================================================================
// MXFP8 weights (may not be implemented yet: then UNSUPPORTED is accepted)
// ==================================================================================

TEST_CASE("MXFP8 weights") {
  for (const spark_dtype out : {SPARK_DTYPE_BF16, SPARK_DTYPE_E4M3}) {
    const Config c = mxfp8(out);
    INFO("out_dtype " << static_cast<int>(out));
    const auto d = make_desc(c);
    const auto a = make_args(c);
    const Result base = can_implement(&d, &a);
    INFO("baseline status: " << static_cast<int>(base.status) << ", message: \"" << base.message << "\"");
    REQUIRE((base.status == SPARK_SUCCESS || base.status == SPARK_ERROR_UNSUPPORTED));
    const bool implemented = base.status == SPARK_SUCCESS;
    if (!implemented) {
      MESSAGE("MXFP8 weights are not implemented (UNSUPPORTED): the MXFP8 rules are only checked "
              "leniently (UNSUPPORTED or the documented INVALID_ARGUMENT)");
      CHECK(icontains(base.message, "weight_format"));
    } else {
      check_success(can_implement(&d, nullptr));
    }

    const std::vector<Mutation> table = {
        invalid("w_scale NULL", [](auto&, auto& a) { a.w_scale = nullptr; }, "w_scale"),
        invalid("w_scale + 2 bytes", [](auto&, auto& a) { a.w_scale = addr(kWScaleAddr + 2); }, "w_scale"),
        invalid("w_scale + 1 byte", [](auto&, auto& a) { a.w_scale = addr(kWScaleAddr + 1); }, "w_scale"),
        valid("w_scale + 4 bytes", [](auto&, auto& a) { a.w_scale = addr(kWScaleAddr + 4); }),
        invalid("w_scale_stride_k = 18 (not a multiple of 4)", [](auto&, auto& a) { a.w_scale_stride_k = 18; },
                "w_scale_stride_k"),
        invalid("w_scale_stride_k = 12 (< N/32)", [](auto&, auto& a) { a.w_scale_stride_k = 12; },
                "w_scale_stride_k"),
        invalid("w_scale_stride_k = 0", [](auto&, auto& a) { a.w_scale_stride_k = 0; }, "w_scale_stride_k"),
        invalid("w_scale_stride_k = -16", [](auto&, auto& a) { a.w_scale_stride_k = -16; }, "w_scale_stride_k"),
        valid("w_scale_stride_k = 20", [](auto&, auto& a) {
          a.w_scale_stride_k = 20;
          a.w_scale_stride_h = int64_t{448} * 20;
        }),
        invalid("w_scale_stride_h = 0", [](auto&, auto& a) { a.w_scale_stride_h = 0; }, "w_scale_stride_h"),
        invalid("w_scale_stride_h = -4", [](auto&, auto& a) { a.w_scale_stride_h = -4; }, "w_scale_stride_h"),
        invalid("w_scale_stride_h = 7170 (not a multiple of 4)",
                [](auto&, auto& a) { a.w_scale_stride_h = 7170; }, "w_scale_stride_h"),
        invalid("e4m3 w_stride_k = 520 (multiple of 8, not of 16)", [](auto&, auto& a) { a.w_stride_k = 520; },
                "w_stride_k"),
        invalid("e4m3 w_stride_h = 448*512 + 8", [](auto&, auto& a) { a.w_stride_h = 448 * 512 + 8; },
                "w_stride_h"),
        valid("e4m3 w_stride_k = 528 (multiple of 16)", [](auto&, auto& a) {
          a.w_stride_k = 528;
          a.w_stride_h = int64_t{448} * 528;
        }),
        invalid("w_stride_k = 256 (< N)", [](auto&, auto& a) { a.w_stride_k = 256; }, "w_stride_k"),
        invalid("w + 8 bytes", [](auto&, auto& a) { a.w = addr(kWAddr + 8); }, "w", kAlignHint),
        invalid("out starting at w_scale", [](auto&, auto& a) { a.out = mut_addr(kWScaleAddr); }, "out",
                kOverlapHint),
    };
    run_mutations(c, table, /*lenient=*/!implemented);
  }
}

// ==================================================================================
// Block-FP8 weights: values as MXFP8's, scales one fp32 per 128 x 128 block of the pack
// ==================================================================================

TEST_CASE("block-FP8 weights") {
  for (const spark_dtype out : {SPARK_DTYPE_BF16, SPARK_DTYPE_E4M3}) {
    const Config c = fp8_block(out);
    INFO("out_dtype " << static_cast<int>(out));
    const auto d = make_desc(c);
    const auto a = make_args(c);
    check_success(can_implement(&d, &a));
    check_success(can_implement(&d, nullptr));
    // H 16, K 192, 448 pack rows per head: packed rows 0 .. 15 * 448 + 191 = 6911, block
    // rows 0 .. 53, so the scales span 54 x 4 floats = 864 bytes.
    const std::vector<Mutation> table = {
        invalid("w_scale NULL", [](auto&, auto& a) { a.w_scale = nullptr; }, "w_scale"),
        invalid("w_scale + 2 bytes", [](auto&, auto& a) { a.w_scale = addr(kWScaleAddr + 2); }, "w_scale"),
        valid("w_scale + 4 bytes", [](auto&, auto& a) { a.w_scale = addr(kWScaleAddr + 4); }),
        invalid("w_scale_stride_k = 3 (< N/128)", [](auto&, auto& a) { a.w_scale_stride_k = 3; },
                "w_scale_stride_k"),
        valid("w_scale_stride_k = 5 (any count of floats)", [](auto&, auto& a) { a.w_scale_stride_k = 5; }),
        invalid("w_scale_stride_k = 0", [](auto&, auto& a) { a.w_scale_stride_k = 0; }, "w_scale_stride_k"),
        invalid("w_scale_stride_k = -4", [](auto&, auto& a) { a.w_scale_stride_k = -4; }, "w_scale_stride_k"),
        invalid("w_scale_stride_h = 191 (< K rows)", [](auto&, auto& a) { a.w_scale_stride_h = 191; },
                "w_scale_stride_h"),
        valid("w_scale_stride_h = 192 (heads back to back)", [](auto&, auto& a) { a.w_scale_stride_h = 192; }),
        valid("w_scale_stride_h = 449 (any row count)", [](auto&, auto& a) { a.w_scale_stride_h = 449; }),
        invalid("w_scale_stride_h = 0", [](auto&, auto& a) { a.w_scale_stride_h = 0; }, "w_scale_stride_h"),
        invalid("w_scale_stride_h = 2^41", [](auto&, auto& a) { a.w_scale_stride_h = int64_t{1} << 41; },
                "w_scale_stride_h"),
        // 127 x 2^40 packed rows of 2^40 floats: an extent past 64 bits (found by fuzz_can_implement).
        invalid("w_scale strides of 2^40",
                [](auto&, auto& a) {
                  a.w_scale_stride_h = int64_t{1} << 40;
                  a.w_scale_stride_k = int64_t{1} << 40;
                },
                "w_scale", kAddressSpaceHint),
        invalid("e4m3 w_stride_k = 520 (multiple of 8, not of 16)", [](auto&, auto& a) { a.w_stride_k = 520; },
                "w_stride_k"),
        valid("out just past the last scale block",
              [](auto&, auto& a) { a.out = mut_addr(kWScaleAddr + 864); }),
        invalid("out over the last scale block", [](auto&, auto& a) { a.out = mut_addr(kWScaleAddr + 848); },
                "out", kOverlapHint),
    };
    run_mutations(c, table);
  }
  // bf16 weights take no scales, whichever format they would belong to.
  run_mutations(bf16_out(), {invalid("bf16 weights with a w_scale",
                                     [](auto&, auto& a) { a.w_scale = addr(kWScaleAddr); }, "w_scale")});
}

// ==================================================================================
// Other entry points
// ==================================================================================

TEST_CASE("status strings and version") {
  std::set<std::string> names;
  for (int s = 0; s <= 10; ++s) {
    const char* n = spark_status_string(static_cast<spark_status>(s));
    INFO("status " << s);
    REQUIRE(n != nullptr);
    CHECK(std::strlen(n) > 0);
    names.insert(n);
  }
  CHECK(names.size() == 11);
  CHECK(spark_status_string(static_cast<spark_status>(1234)) != nullptr);
  CHECK(spark_status_string(static_cast<spark_status>(-1)) != nullptr);

  // Pinned values.
  CHECK(SPARK_SUCCESS == 0);
  CHECK(SPARK_ERROR_INVALID_ARGUMENT == 1);
  CHECK(SPARK_ERROR_UNSUPPORTED == 2);
  CHECK(SPARK_ERROR_NO_DEVICE == 3);
  CHECK(SPARK_ERROR_CUDA == 4);
  CHECK(SPARK_ERROR_COMPILE == 5);
  CHECK(SPARK_ERROR_CACHE == 6);
  CHECK(SPARK_ERROR_NOT_LOADED_WHILE_CAPTURING == 7);
  CHECK(SPARK_ERROR_JIT_DISABLED == 8);
  CHECK(SPARK_ERROR_OUT_OF_MEMORY == 9);
  CHECK(SPARK_ERROR_INTERNAL == 10);
  CHECK(SPARK_WEIGHTS_BF16 == 0);
  CHECK(SPARK_WEIGHTS_MXFP8 == 1);
  CHECK(SPARK_DTYPE_BF16 == 0);
  CHECK(SPARK_DTYPE_E4M3 == 1);

  CHECK(spark_version_number() == static_cast<unsigned>(SPARK_VERSION_NUMBER));
  const char* v = spark_version_string();
  REQUIRE(v != nullptr);
  CHECK(std::string(v) == std::to_string(SPARK_VERSION_MAJOR) + "." + std::to_string(SPARK_VERSION_MINOR) +
                              "." + std::to_string(SPARK_VERSION_PATCH));
}

TEST_CASE("null handles") {
  const Config c = bf16_out();
  const auto d = make_desc(c);
  const auto a = make_args(c);

  {
    const spark_status s = spark_mla_qproj_run(nullptr, &a, nullptr);
    check_failure(Result{s, last_error()}, SPARK_ERROR_INVALID_ARGUMENT, "plan");
  }
  {
    const spark_status s = spark_mla_qproj_run(nullptr, nullptr, nullptr);
    CHECK(s == SPARK_ERROR_INVALID_ARGUMENT);
  }
  {
    spark_mla_qproj_plan plan = nullptr;
    const spark_status s = spark_mla_qproj_plan_create(nullptr, &d, nullptr, &plan);
    check_failure(Result{s, last_error()}, SPARK_ERROR_INVALID_ARGUMENT, "ctx");
    CHECK(plan == nullptr);
  }
  {
    int32_t cc = 0;
    const spark_status s = spark_context_compute_capability(nullptr, &cc);
    check_failure(Result{s, last_error()}, SPARK_ERROR_INVALID_ARGUMENT, "ctx");
  }
  // No-ops.
  spark_context_destroy(nullptr);
  spark_mla_qproj_plan_destroy(nullptr);
}

TEST_CASE("spark_context_create argument checks") {
  spark_context_options opts;
  std::memset(&opts, 0, sizeof opts);
  opts.struct_size = sizeof opts;
  opts.device = 0;

  {
    const spark_status s = spark_context_create(&opts, nullptr);
    INFO("message: " << last_error());
    CHECK(s == SPARK_ERROR_INVALID_ARGUMENT);
  }
  {
    const spark_status s = spark_context_create(nullptr, nullptr);
    INFO("message: " << last_error());
    CHECK(s == SPARK_ERROR_INVALID_ARGUMENT);
  }
  {
    spark_context_options bad = opts;
    bad.device = -1;
    spark_context ctx = nullptr;
    const spark_status s = spark_context_create(&bad, &ctx);
    check_failure(Result{s, last_error()}, SPARK_ERROR_INVALID_ARGUMENT, "device");
    CHECK(ctx == nullptr);
    spark_context_destroy(ctx);
  }
  {
    spark_context_options bad = opts;
    bad.struct_size = 0;
    spark_context ctx = nullptr;
    const spark_status s = spark_context_create(&bad, &ctx);
    check_failure(Result{s, last_error()}, SPARK_ERROR_INVALID_ARGUMENT, "struct_size");
    CHECK(ctx == nullptr);
    spark_context_destroy(ctx);
  }
}

TEST_CASE("spark_context_create: NO_DEVICE without a GPU, SUCCESS with one") {
  spark_context ctx = nullptr;
  const spark_status s = spark_context_create(nullptr, &ctx);
  const std::string msg = last_error();
  INFO("status " << static_cast<int>(s) << " (" << status_name(s) << "), message: \"" << msg << "\"");
  REQUIRE((s == SPARK_SUCCESS || s == SPARK_ERROR_NO_DEVICE));
  if (s == SPARK_ERROR_NO_DEVICE) {
    MESSAGE("no CUDA device here: " << msg);
    CHECK_FALSE(msg.empty());
    CHECK(ctx == nullptr);
    return;
  }
  REQUIRE(ctx != nullptr);
  int32_t cc = 0;
  CHECK(spark_context_compute_capability(ctx, &cc) == SPARK_SUCCESS);
  CHECK(cc >= 50);
  CHECK(spark_context_compute_capability(ctx, nullptr) == SPARK_ERROR_INVALID_ARGUMENT);

  // Plan arguments are checked before anything is compiled.
  const Config c = bf16_out();
  spark_mla_qproj_desc d = make_desc(c);
  spark_mla_qproj_plan plan = nullptr;
  {
    const spark_status st = spark_mla_qproj_plan_create(ctx, nullptr, nullptr, &plan);
    check_failure(Result{st, last_error()}, SPARK_ERROR_INVALID_ARGUMENT, "desc");
  }
  {
    const spark_status st = spark_mla_qproj_plan_create(ctx, &d, nullptr, nullptr);
    INFO("message: " << last_error());
    CHECK(st == SPARK_ERROR_INVALID_ARGUMENT);
  }
  {
    spark_mla_qproj_desc bad = d;
    bad.heads = 0;
    const spark_status st = spark_mla_qproj_plan_create(ctx, &bad, nullptr, &plan);
    check_failure(Result{st, last_error()}, SPARK_ERROR_UNSUPPORTED, "heads");
  }
  {
    spark_mla_qproj_plan_options po;
    std::memset(&po, 0, sizeof po);
    po.struct_size = sizeof po;
    po.max_m = 0;
    const spark_status st = spark_mla_qproj_plan_create(ctx, &d, &po, &plan);
    check_failure(Result{st, last_error()}, SPARK_ERROR_INVALID_ARGUMENT, "max_m");
    po.max_m = 8193;
    const spark_status st2 = spark_mla_qproj_plan_create(ctx, &d, &po, &plan);
    check_failure(Result{st2, last_error()}, SPARK_ERROR_INVALID_ARGUMENT, "max_m");
    po.max_m = 64;
    po.struct_size = 0;
    const spark_status st3 = spark_mla_qproj_plan_create(ctx, &d, &po, &plan);
    check_failure(Result{st3, last_error()}, SPARK_ERROR_INVALID_ARGUMENT, "struct_size");
    po.struct_size = sizeof po;
    po.lazy = 2;
    const spark_status st4 = spark_mla_qproj_plan_create(ctx, &d, &po, &plan);
    check_failure(Result{st4, last_error()}, SPARK_ERROR_INVALID_ARGUMENT, "lazy");
    po.lazy = 0;
    po.enable_pdl = -1;
    const spark_status st5 = spark_mla_qproj_plan_create(ctx, &d, &po, &plan);
    check_failure(Result{st5, last_error()}, SPARK_ERROR_INVALID_ARGUMENT, "enable_pdl");
  }
  CHECK(plan == nullptr);
  spark_mla_qproj_plan_destroy(plan);
  spark_context_destroy(ctx);
}

// ==================================================================================
// Per-thread last error
// ==================================================================================

TEST_CASE("spark_last_error is per thread") {
  const Config c = bf16_out();
  const auto d = make_desc(c);
  const auto a = make_args(c);
  spark_mla_qproj_desc bad = d;
  bad.heads = 0;

  const Result main_fail = can_implement(&bad, nullptr);
  REQUIRE(main_fail.status == SPARK_ERROR_UNSUPPORTED);
  REQUIRE(contains_word(main_fail.message, "heads"));

  std::string t_initial, t_after_success, t_after_fail;
  spark_status t_status = SPARK_ERROR_INTERNAL, t_fail_status = SPARK_SUCCESS;
  std::thread t([&] {
    t_initial = last_error();
    t_status = spark_mla_qproj_can_implement(&d, &a);
    t_after_success = last_error();
    spark_mla_qproj_args a2 = a;
    a2.m = 0;
    t_fail_status = spark_mla_qproj_can_implement(&d, &a2);
    t_after_fail = last_error();
  });
  t.join();

  CHECK(t_initial == "");
  CHECK(t_status == SPARK_SUCCESS);
  CHECK(t_after_success == "");
  CHECK(t_fail_status == SPARK_ERROR_INVALID_ARGUMENT);
  CHECK(contains_word(t_after_fail, "m"));
  CHECK_FALSE(contains_word(t_after_fail, "heads"));
  // The other thread's failure did not touch this thread's message.
  CHECK(last_error() == main_fail.message);
}

TEST_CASE("concurrent failures keep their own messages") {
  const Config c = bf16_out();
  const auto d = make_desc(c);
  const auto a = make_args(c);
  struct Job {
    const char* name;
    std::function<spark_status()> call;
  };
  const std::vector<Job> jobs = {
      {"heads",
       [&] {
         auto x = d;
         x.heads = 0;
         return spark_mla_qproj_can_implement(&x, &a);
       }},
      {"m",
       [&] {
         auto x = a;
         x.m = 0;
         return spark_mla_qproj_can_implement(&d, &x);
       }},
      {"q_pe",
       [&] {
         auto x = a;
         x.q_pe = nullptr;
         return spark_mla_qproj_can_implement(&d, &x);
       }},
      {"w_stride_k",
       [&] {
         auto x = a;
         x.w_stride_k = 0;
         return spark_mla_qproj_can_implement(&d, &x);
       }},
      {"out_stride_h",
       [&] {
         auto x = a;
         x.out_stride_h = 568;
         return spark_mla_qproj_can_implement(&d, &x);
       }},
      {"nope_dim",
       [&] {
         auto x = d;
         x.nope_dim = 64;
         return spark_mla_qproj_can_implement(&x, nullptr);
       }},
  };
  std::atomic<int> bad_status{0}, bad_message{0}, bad_success{0};
  std::vector<std::thread> threads;
  for (const Job& job : jobs) {
    threads.emplace_back([&, job] {
      for (int i = 0; i < 2000; ++i) {
        if (job.call() == SPARK_SUCCESS) ++bad_status;
        if (!contains_word(last_error(), job.name)) ++bad_message;
        if (spark_mla_qproj_can_implement(&d, &a) != SPARK_SUCCESS) ++bad_success;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(bad_status.load() == 0);
  CHECK(bad_message.load() == 0);
  CHECK(bad_success.load() == 0);
}

// ==================================================================================
// Internal checks (ops/mla_qproj/validate.h)
// ==================================================================================

TEST_CASE("validate_args: m above the plan's max_m") {
  const Config c = bf16_out();  // M = 64
  const auto d = make_desc(c);
  auto a = make_args(c);

  CHECK_NOTHROW(spark::validate_desc(&d));
  CHECK_NOTHROW(spark::validate_args(d, &a, 64));
  CHECK_NOTHROW(spark::validate_args(d, &a, spark::kMaxM));

  bool threw = false;
  try {
    spark::validate_args(d, &a, 32);
  } catch (const spark::Error& e) {
    threw = true;
    const std::string msg = e.what();
    INFO("message: " << msg);
    CHECK(e.status() == SPARK_ERROR_INVALID_ARGUMENT);
    CHECK(contains_word(msg, "m"));
    CHECK(msg.find("max_m") != std::string::npos);
    CHECK(msg.rfind("argument 'm'", 0) == 0);  // validate.h: starts with "argument '<name>': "
  }
  CHECK(threw);

  a.m = 32;
  CHECK_NOTHROW(spark::validate_args(d, &a, 32));
}

TEST_CASE("validate_desc / validate_args throw spark::Error naming the argument") {
  const Config c = bf16_out();
  auto d = make_desc(c);
  auto a = make_args(c);

  d.heads = 0;
  bool threw = false;
  try {
    spark::validate_desc(&d);
  } catch (const spark::Error& e) {
    threw = true;
    const std::string msg = e.what();
    INFO("message: " << msg);
    CHECK(e.status() == SPARK_ERROR_UNSUPPORTED);
    CHECK(msg.rfind("argument 'heads'", 0) == 0);
  }
  CHECK(threw);

  d = make_desc(c);
  a.q_pe_stride_h = 0;
  threw = false;
  try {
    spark::validate_args(d, &a, spark::kMaxM);
  } catch (const spark::Error& e) {
    threw = true;
    const std::string msg = e.what();
    INFO("message: " << msg);
    CHECK(e.status() == SPARK_ERROR_INVALID_ARGUMENT);
    CHECK(msg.rfind("argument 'q_pe_stride_h'", 0) == 0);
  }
  CHECK(threw);
}

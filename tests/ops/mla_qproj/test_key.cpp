#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/error.h"
#include "ops/mla_qproj/key.h"
#include "ops/mla_qproj/tiles.h"

using namespace spark;

namespace {
KernelKey sample() { return KernelKey::of(11, 192, {17, 128}, WeightFormat::kBf16, OutDtype::kE4m3, "sm_90a"); }
}  // namespace

TEST_CASE("a kernel key prints a readable name that parses back") {
  const KernelKey k = sample();
  CHECK(k.name() == "mla_qproj.h11.k192.n512.r64.m17-128.wbf16.oe4m3.sm_90a");
  const KernelKey back = KernelKey::parse(k.name());
  CHECK(back == k);
  CHECK(back.hash() == k.hash());
  for (const ArchInfo& a : supported_archs())
    for (int h : {1, 8, 128})
      for (const RegimeEntry& e : regime_table(a.name))
        for (OutDtype o : {OutDtype::kBf16, OutDtype::kE4m3})
          for (WeightFormat w : kWeightFormats) {
            KernelKey x = sample();
            x.heads = h;
            x.arch = std::string(a.name);
            x.regime = e.regime;
            x.out = o;
            x.weights = w;
            CHECK(KernelKey::parse(x.name()) == x);
          }
}

TEST_CASE("keys that differ in any field hash differently") {
  std::unordered_set<uint64_t> seen;
  KernelKey k = sample();
  seen.insert(k.hash());
  k.heads = 12;
  CHECK(seen.insert(k.hash()).second);
  k.k = 128;
  CHECK(seen.insert(k.hash()).second);
  k.regime = {1, 16};
  CHECK(seen.insert(k.hash()).second);
  k.out = OutDtype::kBf16;
  CHECK(seen.insert(k.hash()).second);
  k.weights = WeightFormat::kMxfp8;
  CHECK(seen.insert(k.hash()).second);
  k.weights = WeightFormat::kFp8Block128;
  CHECK(seen.insert(k.hash()).second);
  k.arch = "sm_100a";
  CHECK(seen.insert(k.hash()).second);
}

TEST_CASE("malformed key names are rejected with the field named") {
  auto message = [](const char* name) -> std::string {
    try {
      KernelKey::parse(name);
    } catch (const Error& e) {
      CHECK(e.status() == SPARK_ERROR_INVALID_ARGUMENT);
      return e.what();
    }
    FAIL("parsed: " << name);
    return {};
  };
  CHECK(message("mla_qproj.h8").find("9 dot-separated") != std::string::npos);
  CHECK(message("gemm.h8.k192.n512.r64.m1-16.wbf16.obf16.sm_90a").find("op") != std::string::npos);
  CHECK(message("mla_qproj.hx.k192.n512.r64.m1-16.wbf16.obf16.sm_90a").find("heads") != std::string::npos);
  CHECK(message("mla_qproj.h8.k192.n512.r64.m16-1.wbf16.obf16.sm_90a").find("regime") != std::string::npos);
  CHECK(message("mla_qproj.h8.k192.n512.r64.m1-16.wfp4.obf16.sm_90a").find("weight format") != std::string::npos);
  CHECK(message("mla_qproj.h8.k192.n512.r64.m1-16.wbf16.ofp16.sm_90a").find("dtype") != std::string::npos);
  CHECK(message("mla_qproj.h8.k192.n512.r64.m1-16.wbf16.obf16.gfx942").find("arch") != std::string::npos);
}

// ==================================================================================
// Kernel key names: exactly what name() prints
// ==================================================================================

TEST_CASE("a kernel key parses only from the exact name it prints") {
  const std::vector<std::string> bad = {
      "mla_qproj.h011.k192.n512.r64.m17-128.wbf16.oe4m3.sm_90a",  // leading zeros
      "mla_qproj.h11.k0192.n512.r64.m17-128.wbf16.oe4m3.sm_90a",
      "mla_qproj.h11.k192.n512.r64.m017-128.wbf16.oe4m3.sm_90a",
      "mla_qproj.h11.k192.n512.r64.m17-0128.wbf16.oe4m3.sm_90a",
      "mla_qproj.h+11.k192.n512.r64.m17-128.wbf16.oe4m3.sm_90a",  // signs
      "mla_qproj.h11.k192.n512.r64.m17-+128.wbf16.oe4m3.sm_90a",
      "mla_qproj.h11.k192.n512.r-64.m17-128.wbf16.oe4m3.sm_90a",
      "mla_qproj.h.k192.n512.r64.m17-128.wbf16.oe4m3.sm_90a",     // empty fields
      "mla_qproj.h11.k192.n512.r64.m-128.wbf16.oe4m3.sm_90a",
      "mla_qproj.h11.k192.n512.r64.m17-.wbf16.oe4m3.sm_90a",
      "mla_qproj.h11.k192.n512.r64.m17-128.w.oe4m3.sm_90a",
      "mla_qproj.h11.k192.n512.r64.m17-128.wbf16.oe4m3.",
      "mla_qproj.h0.k192.n512.r64.m17-128.wbf16.oe4m3.sm_90a",    // out of range
      "mla_qproj.h1025.k192.n512.r64.m17-128.wbf16.oe4m3.sm_90a",
      "mla_qproj.h11.k0.n512.r64.m17-128.wbf16.oe4m3.sm_90a",
      "mla_qproj.h11.k65537.n512.r64.m17-128.wbf16.oe4m3.sm_90a",
      "mla_qproj.h11.k192.n99999999999.r64.m17-128.wbf16.oe4m3.sm_90a",
      "mla_qproj.h11.k192.n512.r0.m17-128.wbf16.oe4m3.sm_90a",
      "mla_qproj.h11.k192.n512.r64.m0-128.wbf16.oe4m3.sm_90a",
      "mla_qproj.h11.k192.n512.r64.m17-8193.wbf16.oe4m3.sm_90a",
      "mla_qproj.h11.k192.n512.r64.m17-128-256.wbf16.oe4m3.sm_90a",
      "mla_qproj.h11.k192.n512.r64.m17-128.wbf16.oe4m3.sm_",         // arch: sm_ + 2-3 digits + [a-z]?
      "mla_qproj.h11.k192.n512.r64.m17-128.wbf16.oe4m3.sm_9",
      "mla_qproj.h11.k192.n512.r64.m17-128.wbf16.oe4m3.sm_1000",
      "mla_qproj.h11.k192.n512.r64.m17-128.wbf16.oe4m3.sm_90ab",
      "mla_qproj.h11.k192.n512.r64.m17-128.wbf16.oe4m3.sm_90A",
      "mla_qproj.h11.k192.n512.r64.m17-128.wbf16.oe4m3.sm_x",
      "mla_qproj.h11.k192.n512.r64.m17-128.wbf16.oe4m3.sm_90a ",
      "mla_qproj.h11.k192.n512.r64.m17-128.wbf16.oe4m3.sm_90a\n",
      "mla_qproj.h11.k192.n512.r64.m17-128.wbf16.oe4m3.sm_90a\x1b[2J",
      "mla_qproj.h11.k192.n512.r64.m17-128.wbf16.oe4m3.sm_\x1b]0;pwned\x07",
      std::string("mla_qproj.h11.k192.n512.r64.m17-128.wbf16.oe4m3.sm_90a\0", 56),
  };
  for (const std::string& name : bad) {
    CAPTURE(name);
    CHECK_FALSE(is_canonical_key_name(name));
    CHECK_THROWS_AS(KernelKey::parse(name), Error);
    try {
      KernelKey::parse(name);
    } catch (const Error& e) {
      // The message quotes the name without its control characters.
      for (const char c : std::string(e.what())) CHECK(static_cast<unsigned char>(c) >= 0x20);
    }
  }
  // The largest and smallest of every field round-trip.
  for (const char* name : {"mla_qproj.h1.k1.n1.r1.m1-1.wbf16.obf16.sm_80",
                           "mla_qproj.h1024.k65536.n65536.r65536.m8192-8192.wmxfp8.oe4m3.sm_121a",
                           "mla_qproj.h11.k192.n512.r64.m17-128.wbf16.oe4m3.sm_90a"}) {
    CAPTURE(name);
    CHECK(KernelKey::parse(name).name() == name);
    CHECK(is_canonical_key_name(name));
  }
  // Every key the tables produce.
  for (const ArchInfo& a : supported_archs())
    for (const RegimeEntry& e : regime_table(a.name)) {
      KernelKey k = sample();
      k.arch = std::string(a.name);
      k.regime = e.regime;
      CHECK(is_canonical_key_name(k.name()));
    }
}

// The key-name grammar the cache relies on (core/key_name.h): what it accepts, and that
// nothing that could escape a directory or a terminal gets through.
#include <doctest/doctest.h>

#include <string>

#include "core/key_name.h"

using spark::is_key_name;

TEST_CASE("key names: op, fields, arch") {
  CHECK(is_key_name("mla_qproj.h8.k192.n512.r64.m1-16.wbf16.obf16.sm_90a"));
  CHECK(is_key_name("mla_vproj.h128.m513-8192.sm_100a"));
  CHECK(is_key_name("op.x.sm_80"));
  CHECK(spark::key_op("mla_qproj.h8.k192.sm_90a") == "mla_qproj");
  CHECK(spark::key_arch("mla_qproj.h8.k192.sm_90a") == "sm_90a");
  CHECK(spark::kernel_symbol("mla_qproj") == "spark_mla_qproj");
}

TEST_CASE("key names: everything else is refused") {
  for (const std::string bad :
       {"", "mla_qproj", "mla_qproj.sm_90a", "mla_qproj..h8.sm_90a", ".h8.sm_90a", "mla_qproj.h8.", "mla_qproj.h8.sm_9",
        "mla_qproj.h8.sm_1000", "mla_qproj.h8.sm_90ab", "mla_qproj.h8.SM_90a", "Mla.h8.sm_90a", "9op.h8.sm_90a",
        "mla_qproj.h8/..sm_90a", "mla_qproj.h8 .sm_90a", "mla_qproj.H8.sm_90a", "mla_qproj.h8\x1b[31m.sm_90a",
        "mla_qproj.h8.sm_90a.", "../mla_qproj.h8.sm_90a", "mla_qproj.h8\n.sm_90a"}) {
    CAPTURE(bad);
    CHECK_FALSE(is_key_name(bad));
  }
  CHECK(is_key_name("op." + std::string(spark::kMaxKeyNameBytes - 9, 'x') + ".sm_90a") == false);  // 201 bytes
  CHECK(is_key_name("op." + std::string(spark::kMaxKeyNameBytes - 10, 'x') + ".sm_90a"));  // 200 bytes
  CHECK_FALSE(is_key_name(std::string(33, 'a') + ".x.sm_90a"));  // op at most 32 bytes
}

TEST_CASE("op key names: a key of an op spark has, exactly as the op prints it") {
  CHECK(spark::is_op_key_name("mla_qproj.h8.k192.n512.r64.m1-16.wbf16.obf16.sm_90a"));
  CHECK_FALSE(spark::is_op_key_name("mla_qproj.h08.k192.n512.r64.m1-16.wbf16.obf16.sm_90a"));  // not as printed
  CHECK_FALSE(spark::is_op_key_name("mla_qproj.h8.k192.sm_90a"));                              // fields missing
  CHECK_FALSE(spark::is_op_key_name("mla_vproj.h8.k192.n512.r64.m1-16.wbf16.obf16.sm_90a"));  // no such op
}

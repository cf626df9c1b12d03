// The grammar every kernel key name follows, whatever its op: what the cache needs to know
// of a key (an entry is named "<key>-<hash16>"), and nothing more.
//
//   <op>.<field>...<field>.<arch>      e.g.  mla_qproj.h8.k192.n512.r64.m1-16.wbf16.obf16.sm_90a
//
// op: a lowercase letter, then lowercase letters, digits or '_' (at most 32); fields: one or
// more, each of lowercase letters, digits, '_' or '-'; arch: "sm_", 2-3 digits and an
// optional lowercase letter; at most 200 bytes in all.  A name that passes holds no path
// separator, space, control character or escape.  Each op's key parser is stricter (its
// own fields, canonical numbers): is_op_key_name asks it.
#pragma once

#include <string>
#include <string_view>

namespace spark {

inline constexpr size_t kMaxKeyNameBytes = 200;

// "sm_" + two or three digits + an optional lowercase letter: sm_80, sm_90a, sm_100a.
bool is_arch_name(std::string_view arch) noexcept;
// Whether `name` follows the grammar above.
bool is_key_name(std::string_view name) noexcept;
// The op and arch of a name that is_key_name accepts (unspecified for one it does not).
std::string_view key_op(std::string_view name) noexcept;
std::string_view key_arch(std::string_view name) noexcept;
// The __global__ function a kernel of this op defines: "spark_<op>".
std::string kernel_symbol(std::string_view op);

// Whether `name` is a key of an op spark has, exactly as that op prints its keys (so it
// parses back to itself).  The one place the core meets the ops: defined by the list of ops
// linked in (ops/registry.cpp), called by the cache to tell its entries from anything else.
bool is_op_key_name(std::string_view name) noexcept;

}  // namespace spark

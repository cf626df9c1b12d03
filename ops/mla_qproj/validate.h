// Host-side checks of a descriptor and of one call's arguments (SPEC §1 rules).
// Each failure throws spark::Error whose message starts with "argument '<name>': ".
#pragma once

#include <cstdint>
#include <cstring>

#include "spark/spark.h"

namespace spark {

// A C enum value (a field, or a parameter) as the int the caller stored in it.  C lets a
// caller store any int there, and loading a value outside the enumerators through the C++
// enum type is undefined behaviour, so the bytes are copied out and only the integer is
// compared.
template <class Enum>
int32_t enum_value(const Enum& field) {
  static_assert(sizeof(Enum) == sizeof(int32_t), "the C enums are int-sized");
  int32_t v;
  std::memcpy(&v, &field, sizeof v);
  return v;
}

constexpr int kMaxM = 8192;
constexpr int kMaxHeads = 128;

// struct_size, enum values, and the supported H/K/N/R (UNSUPPORTED when well-formed
// but not implemented).
void validate_desc(const spark_mla_qproj_desc* desc);

// Every rule of spark_mla_qproj_args for desc (already validated), with M <= max_m.
void validate_args(const spark_mla_qproj_desc& desc, const spark_mla_qproj_args* args, int max_m);

}  // namespace spark

// Reading the C API's enum fields and parameters safely.
#pragma once

#include <cstdint>
#include <cstring>

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

}  // namespace spark

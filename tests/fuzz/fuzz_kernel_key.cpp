// KernelKey::parse on any bytes: it accepts exactly the names KernelKey::name() prints (so
// parse(s).name() == s), agrees with is_canonical_key_name, and never lets a byte outside
// [a-z0-9_.-] into a key or a control character into a message.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"
#include "ops/mla_qproj/key.h"

namespace {

bool key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool canonical = spark::is_canonical_key_name(text);
  bool parsed = false;
  try {
    const spark::KernelKey key = spark::KernelKey::parse(text);
    parsed = true;
    if (key.name() != text) __builtin_trap();  // accepted a name name() never prints
    if (spark::KernelKey::parse(key.name()) != key) __builtin_trap();
    for (const char c : text)
      if (!key_char(c)) __builtin_trap();
  } catch (const spark::Error& e) {
    if (e.status() != SPARK_ERROR_INVALID_ARGUMENT) __builtin_trap();
    for (const char c : std::string_view(e.what()))
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) __builtin_trap();
  }
  if (parsed != canonical) __builtin_trap();
  return 0;
}

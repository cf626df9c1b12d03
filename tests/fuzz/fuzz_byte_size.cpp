// parse_byte_size (SPARK_CACHE_MAX_BYTES, spark-cache prune --max-bytes) on any bytes, against
// an oracle computed in 128 bits from the documented grammar (decimal digits, then B or
// K/M/G/T alone or with B or iB, in any case); an accepted size printed back, plainly and
// in each unit that divides it, parses to the same value.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/env.h"

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::optional<uint64_t> oracle(std::string_view text) {
  size_t digits = 0;
  unsigned __int128 value = 0;
  for (; digits < text.size() && text[digits] >= '0' && text[digits] <= '9'; ++digits) {
    value = value * 10 + static_cast<unsigned>(text[digits] - '0');
    if (value > (static_cast<unsigned __int128>(1) << 80)) value = static_cast<unsigned __int128>(1) << 80;
  }
  if (digits == 0) return std::nullopt;
  std::string unit;
  for (const char c : text.substr(digits)) unit += lower(c);
  int shift = -1;
  if (unit.empty() || unit == "b") shift = 0;
  const char* const prefixes = "kmgt";
  for (int i = 0; i < 4; ++i)
    for (const char* tail : {"", "b", "ib"})
      if (unit == std::string(1, prefixes[i]) + tail) shift = 10 * (i + 1);
  if (shift < 0) return std::nullopt;
  value <<= shift;
  if (value > UINT64_MAX) return std::nullopt;
  return static_cast<uint64_t>(value);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::optional<uint64_t> bytes = spark::parse_byte_size(text);
  if (bytes != oracle(text)) __builtin_trap();
  if (!bytes) return 0;
  if (spark::parse_byte_size(std::to_string(*bytes)) != bytes) __builtin_trap();
  const char* const units[] = {"K", "M", "G", "T"};
  for (int i = 0; i < 4; ++i) {
    const int shift = 10 * (i + 1);
    if (*bytes % (uint64_t{1} << shift) != 0) continue;
    const std::string n = std::to_string(*bytes >> shift);
    for (const char* tail : {"", "B", "iB", "b"})
      if (spark::parse_byte_size(n + units[i] + tail) != bytes) __builtin_trap();
  }
  return 0;
}

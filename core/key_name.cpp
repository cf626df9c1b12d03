#include "core/key_name.h"

namespace spark {

namespace {

bool lower_or_digit(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

}  // namespace

bool is_arch_name(std::string_view arch) noexcept {
  if (arch.substr(0, 3) != "sm_") return false;
  arch.remove_prefix(3);
  size_t digits = 0;
  while (digits < arch.size() && arch[digits] >= '0' && arch[digits] <= '9') ++digits;
  if (digits < 2 || digits > 3) return false;
  arch.remove_prefix(digits);
  return arch.empty() || (arch.size() == 1 && arch[0] >= 'a' && arch[0] <= 'z');
}

bool is_key_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > kMaxKeyNameBytes) return false;
  const size_t first = name.find('.');
  const size_t last = name.rfind('.');
  if (first == std::string_view::npos || last == first) return false;  // op, a field, arch
  const std::string_view op = name.substr(0, first);
  if (op.empty() || op.size() > 32 || !(op[0] >= 'a' && op[0] <= 'z')) return false;
  for (const char c : op)
    if (!lower_or_digit(c) && c != '_') return false;
  if (!is_arch_name(name.substr(last + 1))) return false;
  // The fields between op and arch: none empty, nothing outside [a-z0-9_-].
  char prev = '.';
  for (const char c : name.substr(first + 1, last - first)) {  // ends with the arch's '.'
    if (c == '.' && prev == '.') return false;
    if (c != '.' && !lower_or_digit(c) && c != '_' && c != '-') return false;
    prev = c;
  }
  return true;
}

std::string_view key_op(std::string_view name) noexcept { return name.substr(0, name.find('.')); }

std::string_view key_arch(std::string_view name) noexcept {
  const size_t last = name.rfind('.');
  return last == std::string_view::npos ? std::string_view() : name.substr(last + 1);
}

std::string kernel_symbol(std::string_view op) { return "spark_" + std::string(op); }

}  // namespace spark

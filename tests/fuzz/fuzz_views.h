// What the can_implement fuzz targets share: views of strided tensors measured in 128 bits
// (so nothing wraps at 2^64), and the framing of an input into a descriptor and arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace spark_fuzz {

using u128 = unsigned __int128;

struct View {
  u128 begin, end;
};

// [base, base + ((n1 - 1) * s1 + (n2 - 1) * s2 + inner) * bytes), exactly.
inline View view(const void* base, int64_t n1, int64_t s1, int64_t n2, int64_t s2, int64_t inner, int64_t bytes) {
  const __int128 last = static_cast<__int128>(n1 - 1) * s1 + static_cast<__int128>(n2 - 1) * s2 + inner;
  if (last <= 0) __builtin_trap();  // accepted with a non-positive extent
  const u128 begin = reinterpret_cast<uintptr_t>(base);
  return View{begin, begin + static_cast<u128>(last) * static_cast<u128>(bytes)};
}

inline bool overlap(const View& a, const View& b) { return a.begin < b.end && b.begin < a.end; }

// Every view inside the address space, and out apart from the inputs.
template <size_t N>
void check_views(const View& out, const View (&inputs)[N]) {
  const u128 top = static_cast<u128>(UINTPTR_MAX) + 1;
  if (out.end > top) __builtin_trap();
  for (const View& in : inputs) {
    if (in.end > top) __builtin_trap();
    if (overlap(out, in)) __builtin_trap();
  }
}

inline int32_t as_int(const void* field) {
  int32_t v;
  std::memcpy(&v, field, sizeof v);
  return v;
}

// byte 0: desc.struct_size (bit 7: the exact size, else bits 0-6 x 2); byte 1: args.struct_size
// (bit 7: the exact size, else bits 0-5 x 4; bit 6 alone: args = NULL); then the bytes of desc
// and args, zeros where the input is shorter.  Returns whether args is passed.
template <class Desc, class Args>
bool frame(const uint8_t* data, size_t size, Desc& desc, Args& args) {
  std::memset(&desc, 0, sizeof desc);
  std::memset(&args, 0, sizeof args);
  const uint8_t desc_size = data[0], args_size = data[1];
  data += 2;
  size -= 2;
  const size_t n_desc = size < sizeof desc ? size : sizeof desc;
  std::memcpy(&desc, data, n_desc);
  std::memcpy(&args, data + n_desc, size - n_desc < sizeof args ? size - n_desc : sizeof args);
  desc.struct_size = desc_size & 0x80 ? sizeof desc : size_t{desc_size} * 2;
  args.struct_size = args_size & 0x80 ? sizeof args : static_cast<size_t>(args_size & 0x3f) * 4;
  return (args_size & 0xc0) != 0x40;
}

// spark_last_error() after a can_implement that returned status: "" on success, a message
// naming the argument on a refusal, and no other status.
inline void check_status(int status, const char* message) {
  if (message == nullptr) __builtin_trap();
  const bool success = status == 0;
  if (success && message[0] != '\0') __builtin_trap();
  if (!success) {
    if (status != 1 && status != 2) __builtin_trap();  // INVALID_ARGUMENT, UNSUPPORTED
    if (std::strncmp(message, "argument '", 10) != 0) __builtin_trap();
  }
}

}  // namespace spark_fuzz

// Shared libraries loaded at run time rather than linked (the CUDA driver, NVRTC), so that
// libspark.so loads on machines without them and says what is missing when it is used.
#pragma once

#include <dlfcn.h>

#include <string>

#include <fmt/format.h>

namespace spark {

// dlopen(file) with RTLD_NOW | RTLD_LOCAL; nullptr with `error` set ("cannot load <what>
// (<file>): <reason>") when it fails.
inline void* open_library(const std::string& file, const char* what, std::string& error) {
  void* lib = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = ::dlerror();
    error = fmt::format("cannot load {} ({}): {}", what, file, why ? why : "not found");
  }
  return lib;
}

// fn = symbol `name` of lib; a missing symbol sets `error` ("<file> has no symbol <name>")
// unless an earlier one already did.
template <class Fn>
void bind_symbol(void* lib, const std::string& file, const char* name, Fn& fn, std::string& error) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, name));
  if (!fn && error.empty()) error = fmt::format("{} has no symbol {}", file, name);
}

}  // namespace spark

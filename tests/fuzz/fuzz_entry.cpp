// The check every cache load, `spark-cache verify` and import make of one entry
// (check_entry_bytes: manifest JSON, hash, name, sizes, checksums, the hash recomputed from
// the entry's own inputs, the cubin's ELF headers and arch), and the ELF reader behind it,
// on arbitrary bytes.  The input is framed as
//
//   u16 name length, u16 manifest length, u32 source length (little-endian), then the
//   name, the manifest, the source, and the rest as the cubin
//
// It must never crash or throw anything but spark::Error; an entry it passes must have a
// cubin that cubin_problem() accepts for the manifest key's arch.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "cache/entry.h"
#include "core/error.h"
#include "core/cubin_elf.h"
#include "ops/mla_qproj/key.h"
#include "ops/mla_qproj/render.h"

namespace {

template <class T>
bool take(std::string_view& in, T& v) {
  if (in.size() < sizeof(T)) return false;
  std::memcpy(&v, in.data(), sizeof(T));
  in.remove_prefix(sizeof(T));
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  // The ELF reader on its own, on the raw input.
  spark::KernelResources r;
  spark::fill_resources_from_cubin(in, spark::kKernelEntryName, r);
  (void)spark::cubin_problem(in, "sm_90a", spark::kKernelEntryName);

  uint16_t name_len = 0, manifest_len = 0;
  uint32_t source_len = 0;
  if (!take(in, name_len) || !take(in, manifest_len) || !take(in, source_len)) return 0;
  if (in.size() < size_t(name_len) + manifest_len + source_len) return 0;
  const std::string name(in.substr(0, name_len));
  const std::string manifest(in.substr(name_len, manifest_len));
  std::string source(in.substr(name_len + manifest_len, source_len));
  std::string cubin(in.substr(size_t(name_len) + manifest_len + source_len));
  try {
    const spark::EntryCheck c = spark::check_entry_bytes(name, manifest, cubin, std::move(source));
    if (c.ok() && !spark::cubin_problem(c.cubin, spark::KernelKey::parse(c.manifest->key).arch,
                                        spark::kKernelEntryName)
                       .empty())
      __builtin_trap();
  } catch (const spark::Error&) {
  }
  return 0;
}

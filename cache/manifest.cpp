#include "cache/manifest.h"

#include <limits>

#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "core/error.h"

namespace spark {

std::string checksum_hex(const std::string& bytes) {
  return fmt::format("{:016x}", XXH3_64bits(bytes.data(), bytes.size()));
}

std::string Manifest::to_json() const {
  nlohmann::ordered_json j;
  j["format_version"] = format_version;
  j["key"] = key;
  j["hash"] = hash;
  j["generator_version"] = generator_version;
  j["nvrtc_version"] = nvrtc_version;
  j["templates_digest"] = templates_digest;
  j["options"] = options;
  j["tile"] = tile;
  j["threads"] = threads;
  j["smem_bytes"] = smem_bytes;
  j["cubin_size"] = cubin_size;
  j["cubin_xxh3"] = cubin_xxh3;
  j["source_size"] = source_size;
  j["source_xxh3"] = source_xxh3;
  j["compile_ms"] = compile_ms;
  j["resources"] = {{"registers", resources.registers},
                    {"shared_static_bytes", resources.shared_static_bytes},
                    {"local_bytes", resources.local_bytes},
                    {"spill_bytes", resources.spill_bytes}};
  j["created_unix_ms"] = created_unix_ms;
  return j.dump(2) + "\n";
}

namespace {

// A manifest comes from the cache directory or an archive: untrusted. Every integer field is a
// JSON integer within the field's range; a float such as 8e46 is refused, not converted.
template <typename T>
T integer(const nlohmann::json& j, const char* name, T lo = 0) {
  const auto& v = j.at(name);
  constexpr uint64_t hi = static_cast<uint64_t>(std::numeric_limits<T>::max());
  const bool fits = v.is_number_unsigned()  ? v.get<uint64_t>() <= hi && (lo <= 0 || v.get<uint64_t>() >= uint64_t(lo))
                    : v.is_number_integer() ? v.get<int64_t>() >= int64_t(lo) && v.get<int64_t>() < 0
                                            : false;
  SPARK_CHECK(fits, SPARK_ERROR_CACHE, "manifest field \"{}\" is not an integer in [{}, {}]", name, lo, hi);
  return v.is_number_unsigned() ? static_cast<T>(v.get<uint64_t>()) : static_cast<T>(v.get<int64_t>());
}

}  // namespace

Manifest Manifest::from_json(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    Manifest m;
    m.format_version = integer<int>(j, "format_version");
    SPARK_CHECK(m.format_version == kCacheFormatVersion, SPARK_ERROR_CACHE,
                "manifest has cache format {}, this spark reads {}", m.format_version, kCacheFormatVersion);
    m.key = j.at("key").get<std::string>();
    m.hash = j.at("hash").get<std::string>();
    m.generator_version = integer<int>(j, "generator_version");
    m.nvrtc_version = j.at("nvrtc_version").get<std::string>();
    m.templates_digest = j.at("templates_digest").get<std::string>();
    m.options = j.at("options").get<std::vector<std::string>>();
    m.tile = j.at("tile").get<std::string>();
    m.threads = integer<int>(j, "threads");
    m.smem_bytes = integer<int>(j, "smem_bytes");
    m.cubin_size = integer<uint64_t>(j, "cubin_size");
    m.cubin_xxh3 = j.at("cubin_xxh3").get<std::string>();
    m.source_size = integer<uint64_t>(j, "source_size");
    m.source_xxh3 = j.at("source_xxh3").get<std::string>();
    const auto& ms = j.at("compile_ms");
    SPARK_CHECK(ms.is_number() && ms.get<double>() >= 0 && ms.get<double>() <= 1e15, SPARK_ERROR_CACHE,
                "manifest field \"compile_ms\" is not a number in [0, 1e15]");
    m.compile_ms = ms.get<double>();
    const auto& r = j.at("resources");  // -1: not known
    m.resources.registers = integer<int>(r, "registers", -1);
    m.resources.shared_static_bytes = integer<int>(r, "shared_static_bytes", -1);
    m.resources.local_bytes = integer<int>(r, "local_bytes", -1);
    m.resources.spill_bytes = integer<int>(r, "spill_bytes", -1);
    m.created_unix_ms = integer<int64_t>(j, "created_unix_ms");
    return m;
  } catch (const nlohmann::json::exception& e) {
    SPARK_FAIL(SPARK_ERROR_CACHE, "manifest is not valid: {}", e.what());
  }
}

}  // namespace spark

#include "cache/manifest.h"

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

Manifest Manifest::from_json(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    Manifest m;
    m.format_version = j.at("format_version").get<int>();
    SPARK_CHECK(m.format_version == kCacheFormatVersion, SPARK_ERROR_CACHE,
                "manifest has cache format {}, this spark reads {}", m.format_version, kCacheFormatVersion);
    m.key = j.at("key").get<std::string>();
    m.hash = j.at("hash").get<std::string>();
    m.generator_version = j.at("generator_version").get<int>();
    m.nvrtc_version = j.at("nvrtc_version").get<std::string>();
    m.templates_digest = j.at("templates_digest").get<std::string>();
    m.options = j.at("options").get<std::vector<std::string>>();
    m.tile = j.at("tile").get<std::string>();
    m.threads = j.at("threads").get<int>();
    m.smem_bytes = j.at("smem_bytes").get<int>();
    m.cubin_size = j.at("cubin_size").get<uint64_t>();
    m.cubin_xxh3 = j.at("cubin_xxh3").get<std::string>();
    m.source_size = j.at("source_size").get<uint64_t>();
    m.source_xxh3 = j.at("source_xxh3").get<std::string>();
    m.compile_ms = j.at("compile_ms").get<double>();
    const auto& r = j.at("resources");
    m.resources.registers = r.at("registers").get<int>();
    m.resources.shared_static_bytes = r.at("shared_static_bytes").get<int>();
    m.resources.local_bytes = r.at("local_bytes").get<int>();
    m.resources.spill_bytes = r.at("spill_bytes").get<int>();
    m.created_unix_ms = j.at("created_unix_ms").get<int64_t>();
    return m;
  } catch (const nlohmann::json::exception& e) {
    SPARK_FAIL(SPARK_ERROR_CACHE, "manifest is not valid: {}", e.what());
  }
}

}  // namespace spark

#include "api/about.h"

#include <fmt/format.h>

#include "cache/archive.h"
#include "cache/manifest.h"
#include "jit/arch.h"
#include "jit/nvrtc.h"
#include "ops/mla_qproj/render.h"
#include "spark/spark.h"

namespace spark {

std::string version_text(std::string_view tool) {
  const NvrtcInfo nvrtc = nvrtc_info();
  std::string text = fmt::format("{} {}\n", tool, spark_version_string());
  text += fmt::format("generator      {}\n", kGeneratorVersion);
  text += fmt::format("cache format   {}\n", kCacheFormatVersion);
  text += fmt::format("archive format {}\n", kArchiveFormatVersion);
  text += fmt::format("NVRTC built    {}\n", nvrtc_built_version());
  text += nvrtc.loaded ? fmt::format("NVRTC loaded   {} ({})\n", nvrtc.version, nvrtc.path)
                       : fmt::format("NVRTC loaded   not found ({})\n", nvrtc.problem);
  text += fmt::format("archs          {}\n", supported_arch_names());
  return text;
}

nlohmann::ordered_json version_json() {
  const NvrtcInfo nvrtc = nvrtc_info();
  nlohmann::ordered_json archs = nlohmann::ordered_json::array();
  for (const ArchInfo& a : supported_archs()) archs.push_back(std::string(a.name));
  return {{"spark", spark_version_string()},
          {"generator", kGeneratorVersion},
          {"cache_format", kCacheFormatVersion},
          {"archive_format", kArchiveFormatVersion},
          {"nvrtc_built", nvrtc_built_version()},
          {"nvrtc_loaded", nvrtc.loaded ? nlohmann::ordered_json(nvrtc.version) : nlohmann::ordered_json(nullptr)},
          {"archs", archs}};
}

}  // namespace spark

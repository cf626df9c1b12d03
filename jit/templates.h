// The device templates (templates/*.cuh), embedded at build time (cmake/embed_templates.cmake):
// every kernel's source may include them, NVRTC gets them as headers, and their digest is
// part of every cache key.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace spark {

struct EmbeddedTemplate {
  std::string_view name;   // file name, as generated sources #include it
  std::string_view bytes;
};

// Sorted by name.
const std::vector<EmbeddedTemplate>& embedded_templates();

// A digest of every embedded template byte (hex); part of every cache key.
const std::string& templates_digest();

}  // namespace spark

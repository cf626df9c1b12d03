// The bytes of templates/*.cuh, embedded at build time (cmake/embed_templates.cmake).
#pragma once

#include <string_view>
#include <vector>

namespace spark {

struct EmbeddedTemplate {
  std::string_view name;   // file name, as generated sources #include it
  std::string_view bytes;
};

// Sorted by name.
const std::vector<EmbeddedTemplate>& embedded_templates();

}  // namespace spark

// "Know what you run": the versions and targets of this build, and what it finds on the
// machine, as every tool's --version and `spark-cache info` print them.  One place, so the
// tools cannot disagree.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace spark {

// The lines of `<tool> --version`: spark, generator, cache and archive formats, NVRTC
// built with and loaded (or "not found" with the reason), the targets spark compiles for.
std::string version_text(std::string_view tool);

// The same, as JSON (the "version" object of `spark-cache info --json`).
nlohmann::ordered_json version_json();

}  // namespace spark

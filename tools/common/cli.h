// The command-line conventions every spark tool follows (docs/tools.md):
//   exit 0 when all is well, 1 when a problem was found (or an operation failed), 2 for a
//   usage error; a usage error names the flag as it is typed (--max-m), never a variable;
//   --help shows every default; --version prints what this build is and what it loads;
//   with --json a failure is one JSON object on stdout, {"error": ..., "status": ...}, so
//   that stdout stays parseable.
#pragma once

#include <functional>
#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "api/about.h"
#include "core/error.h"

namespace spark_tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitProblem = 1;
inline constexpr int kExitUsage = 2;

// Call before any option is added: the defaults then show in --help of the app and of every
// subcommand added after.
inline void apply_conventions(CLI::App& app, const std::string& tool) {
  app.option_defaults()->always_capture_default();
  app.set_version_flag(
      "--version",
      std::function<std::string()>([tool] {
        std::string text = spark::version_text(tool);
        if (!text.empty() && text.back() == '\n') text.pop_back();  // CLI11 ends the line itself
        return text;
      }),
      "print the versions of spark, its formats and NVRTC, and the targets, then exit");
}

// True when --json is among the arguments (before a "--"): a usage error is then reported as
// JSON too, though parsing never got as far as setting the flag.
inline bool wants_json(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    if (a == "--json") return true;
  }
  return false;
}

// JSON for a terminal or a pipe: text that is not UTF-8 (a path) is printed with
// replacement characters rather than failing the command.
inline std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// A failure: with json, {"error", "status", "exit_code"} on stdout; else "<tool>: message" on
// stderr.  Returns exit_code.
inline int report_error(const std::string& tool, const std::string& message, const std::string& status, int exit_code,
                        bool json) {
  if (json) {
    std::cout << dump(nlohmann::ordered_json{{"error", message}, {"status", status}, {"exit_code", exit_code}})
              << "\n";
  } else {
    std::cerr << tool << ": " << message << "\n";
  }
  return exit_code;
}

// The status word of a spark error, as the JSON error object gives it.
inline std::string status_word(spark_status s) {
  switch (s) {
    case SPARK_ERROR_INVALID_ARGUMENT: return "invalid_argument";
    case SPARK_ERROR_UNSUPPORTED: return "unsupported";
    case SPARK_ERROR_NO_DEVICE: return "no_device";
    case SPARK_ERROR_CUDA: return "cuda";
    case SPARK_ERROR_COMPILE: return "compile";
    case SPARK_ERROR_CACHE: return "cache";
    case SPARK_ERROR_JIT_DISABLED: return "jit_disabled";
    case SPARK_ERROR_OUT_OF_MEMORY: return "out_of_memory";
    default: return "error";
  }
}

// Parses argv.  nullopt: go on.  Otherwise the exit code to return: 0 after --help or
// --version (printed), 2 after a usage error (reported, naming the flag as typed).
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv, const std::string& tool,
                                             bool json) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return report_error(tool, std::string(e.what()) + " (see --help)", "usage", kExitUsage, json);
  }
}

}  // namespace spark_tools

// Small POSIX file helpers with errors reported as spark::Error (status CACHE).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace spark {

std::string read_file(const std::filesystem::path& path);
// Writes a file (created or truncated).
void write_file(const std::filesystem::path& path, std::string_view bytes);
// Writes and fsyncs a file (created or truncated).
void write_file_synced(const std::filesystem::path& path, std::string_view bytes);
// fsync on a directory, so a rename or create inside it survives a crash.
void fsync_dir(const std::filesystem::path& dir);

}  // namespace spark

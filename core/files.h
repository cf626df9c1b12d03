// Small POSIX file helpers with errors reported as spark::Error (status CACHE).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace spark {

std::string read_file(const std::filesystem::path& path);
// The same without throwing: 0 with the bytes in `out`, or the errno of the failed open or read.
int try_read_file(const std::filesystem::path& path, std::string& out);
// Writes a file (created or truncated).
void write_file(const std::filesystem::path& path, std::string_view bytes);
// Writes and fsyncs a file (created or truncated).
void write_file_synced(const std::filesystem::path& path, std::string_view bytes);
// fsync on a directory, so a rename or create inside it survives a crash.
void fsync_dir(const std::filesystem::path& dir);

}  // namespace spark

// Small POSIX file helpers by path, with errors reported as spark::Error (status CACHE), for
// files outside any cache (SPARK_DUMP_DIR) and for tests.  Inside a cache directory spark
// uses core/dir.h, which never follows a link.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace spark {

std::string read_file(const std::filesystem::path& path);
// The same without throwing: 0 with the bytes in `out`, or the errno of the failed open or read.
int try_read_file(const std::filesystem::path& path, std::string& out);
// Writes a file (created or truncated); a failed write removes it.
void write_file(const std::filesystem::path& path, std::string_view bytes);
// Writes and fsyncs a file (created or truncated); a failed write, fsync or close removes it.
void write_file_synced(const std::filesystem::path& path, std::string_view bytes);

}  // namespace spark

// Durable file-system steps for the checkpoint commit protocol (POSIX): a file or directory is
// flushed to the storage device with fsync, and small files are replaced atomically (write a
// temporary sibling, fsync it, rename it over the target, fsync the parent directory).
// Failures throw std::runtime_error naming the path and the system's reason.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

namespace linea {

// fsync of a regular file or of a directory (which makes the entries created in it durable).
void fsync_path(const std::filesystem::path& path);

// Atomically replaces `path` with `contents`: a crash leaves either the old file or the new one.
void write_file_atomically(const std::filesystem::path& path, std::string_view contents);

// The whole content of a (small) file.
std::string read_file(const std::filesystem::path& path);

}  // namespace linea

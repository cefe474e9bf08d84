// Atomic file writes. Content goes to a temporary file beside the target ("<name>.tmp.<pid>"),
// is flushed and fsync'ed, then renamed over the target, so a reader sees either the old file or
// the complete new one, never a partial write. A writer destroyed before commit() removes its
// temporary file and leaves the target untouched.
#pragma once
#include <cstdio>
#include <filesystem>
#include <string_view>

namespace linea::data {

class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::filesystem::path target);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t nbytes);
  // Overwrites bytes already written at `offset` (e.g. a header patched once the size is known).
  void write_at(int64_t offset, const void* data, size_t nbytes);
  // Flushes, fsyncs and renames onto the target. Throws std::runtime_error naming the target.
  void commit();
  const std::filesystem::path& target() const { return target_; }

 private:
  [[noreturn]] void fail(std::string_view what);
  std::filesystem::path target_;
  std::filesystem::path temp_;
  std::FILE* file_ = nullptr;
};

// One-shot form: writes `bytes` to `target` atomically.
void write_file_atomically(const std::filesystem::path& target, std::string_view bytes);

// Reads a whole file; throws std::runtime_error naming it when it cannot be read.
std::string read_file(const std::filesystem::path& path);

}  // namespace linea::data

// Durable, atomic file writes (POSIX), for every file linea writes that a crash must not leave
// half-written (shards, manifests, checkpoints and their commit markers, metrics, the coordinator's
// journal and summaries). Content goes to a temporary file beside the target ("<name>.tmp.<pid>"),
// is flushed and fsync'ed, renamed over the target, and the directory is fsync'ed, so a reader sees
// either the old file or the complete new one, never a partial write, and the new one survives a
// crash once commit() returned. A writer destroyed before commit() removes its temporary file and
// leaves the target untouched. Failures throw std::runtime_error naming the file and the reason.
#pragma once
#include <sys/types.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace linea::data {

class AtomicFileWriter {
 public:
  // `mode`: the permissions of the new file (before the umask), e.g. 0600 for a private one.
  explicit AtomicFileWriter(std::filesystem::path target, mode_t mode = 0644);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t nbytes);
  // Overwrites bytes already written at `offset` (e.g. a header patched once the size is known).
  void write_at(int64_t offset, const void* data, size_t nbytes);
  // Flushes, fsyncs, renames onto the target and fsyncs its directory.
  void commit();
  const std::filesystem::path& target() const { return target_; }

 private:
  [[noreturn]] void fail(std::string_view what);
  std::filesystem::path target_;
  std::filesystem::path temp_;
  std::FILE* file_ = nullptr;
};

// One-shot form: writes `bytes` to `target` atomically and durably.
void write_file_atomically(const std::filesystem::path& target, std::string_view bytes, mode_t mode = 0644);

// Reads a whole file; throws std::runtime_error naming it when it cannot be read.
std::string read_file(const std::filesystem::path& path);

// fsync of a regular file or of a directory (which makes the entries created in it durable).
void fsync_path(const std::filesystem::path& path);

}  // namespace linea::data

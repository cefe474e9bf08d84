#include "checkpoint/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace linea {

namespace {

[[noreturn]] void fail(std::string_view operation, const std::filesystem::path& path, int error) {
  throw std::runtime_error("cannot " + std::string(operation) + " '" + path.string() + "': " + std::strerror(error));
}

// A file descriptor closed on scope exit.
class FileDescriptor {
 public:
  FileDescriptor(const std::filesystem::path& path, int flags, mode_t mode = 0)
      : fd_(::open(path.c_str(), flags | O_CLOEXEC, mode)) {
    if (fd_ < 0) fail("open", path, errno);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now, reporting an error (some file systems report write errors only at close).
  void close(const std::filesystem::path& path) {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("close", path, errno);
  }

 private:
  int fd_;
};

}  // namespace

void fsync_path(const std::filesystem::path& path) {
  FileDescriptor fd(path, O_RDONLY);
  if (::fsync(fd.get()) != 0) fail("fsync", path, errno);
}

void write_file_atomically(const std::filesystem::path& path, std::string_view contents) {
  std::filesystem::path temporary = path;
  temporary += ".tmp";
  {
    FileDescriptor fd(temporary, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (size_t written = 0; written < contents.size();) {
      const ssize_t n = ::write(fd.get(), contents.data() + written, contents.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("write", temporary, errno);
      written += static_cast<size_t>(n);
    }
    if (::fsync(fd.get()) != 0) fail("fsync", temporary, errno);
    fd.close(temporary);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) fail("rename to '" + path.string() + "'", temporary, errno);
  fsync_path(path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path());
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("open", path, errno);
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) fail("read", path, errno);
  return contents.str();
}

}  // namespace linea

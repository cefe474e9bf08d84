#include "data/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace linea::data {

AtomicFileWriter::AtomicFileWriter(std::filesystem::path target, mode_t mode) : target_(std::move(target)) {
  temp_ = target_;
  temp_ += ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) fail("cannot create temporary file " + temp_.string());
  file_ = ::fdopen(fd, "wb");
  if (!file_) {
    const int error = errno;
    ::close(fd);
    std::remove(temp_.c_str());
    errno = error;
    fail("cannot open temporary file " + temp_.string());
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_) {
    std::fclose(file_);
    std::remove(temp_.c_str());
  }
}

void AtomicFileWriter::fail(std::string_view what) {
  const std::string reason = std::strerror(errno);
  if (file_) {
    std::fclose(file_);
    file_ = nullptr;
    std::remove(temp_.c_str());
  }
  throw std::runtime_error("writing " + target_.string() + ": " + std::string(what) + " (" + reason + ")");
}

void AtomicFileWriter::write(const void* data, size_t nbytes) {
  if (!file_) throw std::logic_error("AtomicFileWriter::write after commit: " + target_.string());
  if (nbytes && std::fwrite(data, 1, nbytes, file_) != nbytes) fail("write failed");
}

void AtomicFileWriter::write_at(int64_t offset, const void* data, size_t nbytes) {
  if (!file_) throw std::logic_error("AtomicFileWriter::write_at after commit: " + target_.string());
  const long end = std::ftell(file_);
  if (end < 0 || std::fseek(file_, offset, SEEK_SET) != 0) fail("seek failed");
  write(data, nbytes);
  if (std::fseek(file_, end, SEEK_SET) != 0) fail("seek failed");
}

void AtomicFileWriter::commit() {
  if (!file_) throw std::logic_error("AtomicFileWriter::commit twice: " + target_.string());
  if (std::fflush(file_) != 0) fail("flush failed");
  if (::fsync(::fileno(file_)) != 0) fail("fsync failed");
  if (std::fclose(file_) != 0) {
    file_ = nullptr;
    std::remove(temp_.c_str());
    throw std::runtime_error("writing " + target_.string() + ": close failed (" + std::strerror(errno) + ")");
  }
  file_ = nullptr;
  if (std::rename(temp_.c_str(), target_.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temp_.c_str());
    throw std::runtime_error("writing " + target_.string() + ": rename from " + temp_.string() + " failed (" + reason +
                             ")");
  }
  fsync_path(target_.has_parent_path() ? target_.parent_path() : std::filesystem::path("."));
}

void write_file_atomically(const std::filesystem::path& target, std::string_view bytes, mode_t mode) {
  AtomicFileWriter writer(target, mode);
  writer.write(bytes.data(), bytes.size());
  writer.commit();
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string() + " (" + std::strerror(errno) + ")");
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) throw std::runtime_error("cannot read " + path.string());
  return std::move(content).str();
}

void fsync_path(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path.string() + " to fsync it (" + std::strerror(errno) + ")");
  if (::fsync(fd) != 0) {
    const std::string reason = std::strerror(errno);
    ::close(fd);
    throw std::runtime_error("cannot fsync " + path.string() + " (" + reason + ")");
  }
  ::close(fd);
}

}  // namespace linea::data

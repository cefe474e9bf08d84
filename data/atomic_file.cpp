#include "data/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace linea::data {

AtomicFileWriter::AtomicFileWriter(std::filesystem::path target) : target_(std::move(target)) {
  temp_ = target_;
  temp_ += ".tmp." + std::to_string(::getpid());
  file_ = std::fopen(temp_.c_str(), "wb");
  if (!file_) fail("cannot create temporary file " + temp_.string());
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
}

void write_file_atomically(const std::filesystem::path& target, std::string_view bytes) {
  AtomicFileWriter writer(target);
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

}  // namespace linea::data

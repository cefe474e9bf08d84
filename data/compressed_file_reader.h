// CompressedFileReader: reads a file's bytes, decompressing on the fly when the file starts with
// the gzip magic (1f 8b; multi-member files such as dictzip .dz included) or the zstd magic
// (28 b5 2f fd); anything else is read as it is. The file name plays no part.
// LineReader splits such a stream into lines ('\n' removed, a final '\r' kept).
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace linea::data {

enum class Compression : uint8_t { none, gzip, zstd };

class CompressedFileReader {
 public:
  // Throws std::runtime_error naming the file when it cannot be opened.
  explicit CompressedFileReader(std::filesystem::path path);
  ~CompressedFileReader();
  CompressedFileReader(const CompressedFileReader&) = delete;
  CompressedFileReader& operator=(const CompressedFileReader&) = delete;

  // Reads up to `n` decompressed bytes; returns 0 only at the end. Throws std::runtime_error
  // naming the file on corrupt or truncated compressed data.
  size_t read(char* out, size_t n);
  Compression compression() const { return compression_; }
  const std::filesystem::path& path() const { return path_; }
  // How many bytes of the file (compressed, as stored) have been read.
  int64_t raw_position() const;

 private:
  [[noreturn]] void fail(const std::string& what) const;
  size_t read_zstd(char* out, size_t n);

  std::filesystem::path path_;
  Compression compression_ = Compression::none;
  std::FILE* file_ = nullptr;  // none and zstd
  void* gz_ = nullptr;         // gzFile
  struct Zstd;
  std::unique_ptr<Zstd> zstd_;
};

// Reads a whole file, decompressed.
std::string read_decompressed(const std::filesystem::path& path);

class LineReader {
 public:
  explicit LineReader(std::filesystem::path path) : in_(std::move(path)) {}
  // False at the end of the file. `line_number()` is then the number of lines read.
  bool next(std::string& line);
  int64_t line_number() const { return line_number_; }
  const std::filesystem::path& path() const { return in_.path(); }
  int64_t raw_position() const { return in_.raw_position(); }

 private:
  CompressedFileReader in_;
  std::vector<char> buffer_ = std::vector<char>(1 << 20);
  size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  int64_t line_number_ = 0;
};

}  // namespace linea::data

#include "data/compressed_file_reader.h"

#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace linea::data {

struct CompressedFileReader::Zstd {
  ZSTD_DCtx* ctx = ZSTD_createDCtx();
  std::vector<char> in = std::vector<char>(ZSTD_DStreamInSize());
  ZSTD_inBuffer input{in.data(), 0, 0};
  size_t last_result = 0;  // 0 when a frame has just been completed
  ~Zstd() { ZSTD_freeDCtx(ctx); }
};

CompressedFileReader::CompressedFileReader(std::filesystem::path path) : path_(std::move(path)) {
  std::FILE* f = std::fopen(path_.c_str(), "rb");
  if (!f) throw std::runtime_error("input " + path_.string() + ": cannot open (" + std::strerror(errno) + ")");
  unsigned char magic[4] = {0, 0, 0, 0};
  const size_t got = std::fread(magic, 1, 4, f);
  if (got >= 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    compression_ = Compression::gzip;
  } else if (got == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd) {
    compression_ = Compression::zstd;
  }
  if (compression_ == Compression::gzip) {
    std::fclose(f);
    gz_ = gzopen(path_.c_str(), "rb");
    if (!gz_) throw std::runtime_error("input " + path_.string() + ": cannot open as gzip");
    gzbuffer(static_cast<gzFile>(gz_), 1 << 18);
    return;
  }
  std::rewind(f);
  file_ = f;
  if (compression_ == Compression::zstd) zstd_ = std::make_unique<Zstd>();
}

CompressedFileReader::~CompressedFileReader() {
  if (gz_) gzclose(static_cast<gzFile>(gz_));
  if (file_) std::fclose(file_);
}

int64_t CompressedFileReader::raw_position() const {
  if (gz_) return static_cast<int64_t>(gzoffset(static_cast<gzFile>(gz_)));
  return file_ ? static_cast<int64_t>(std::ftell(file_)) : 0;
}

void CompressedFileReader::fail(const std::string& what) const {
  const char* kind = compression_ == Compression::gzip ? "gzip" : compression_ == Compression::zstd ? "zstd" : "plain";
  throw std::runtime_error("input " + path_.string() + " (" + kind + "): " + what);
}

size_t CompressedFileReader::read(char* out, size_t n) {
  switch (compression_) {
    case Compression::none: {
      const size_t got = std::fread(out, 1, n, file_);
      if (got < n && std::ferror(file_)) fail(std::string("read error (") + std::strerror(errno) + ")");
      return got;
    }
    case Compression::gzip: {
      auto* gz = static_cast<gzFile>(gz_);
      const int got = gzread(gz, out, static_cast<unsigned>(std::min<size_t>(n, 1u << 30)));
      int code = Z_OK;
      const char* message = gzerror(gz, &code);
      if (got < 0 || (code != Z_OK && code != Z_BUF_ERROR)) fail(std::string("corrupt data: ") + message);
      if (got == 0 && code == Z_BUF_ERROR) fail("truncated: the compressed stream ends early");
      return static_cast<size_t>(got);
    }
    case Compression::zstd: return read_zstd(out, n);
  }
  return 0;
}

size_t CompressedFileReader::read_zstd(char* out, size_t n) {
  Zstd& z = *zstd_;
  ZSTD_outBuffer output{out, n, 0};
  while (output.pos == 0) {
    if (z.input.pos == z.input.size) {
      z.input.size = std::fread(z.in.data(), 1, z.in.size(), file_);
      z.input.pos = 0;
      if (std::ferror(file_)) fail(std::string("read error (") + std::strerror(errno) + ")");
      if (z.input.size == 0) {
        if (z.last_result != 0) fail("truncated: the last zstd frame is incomplete");
        return 0;
      }
    }
    z.last_result = ZSTD_decompressStream(z.ctx, &output, &z.input);
    if (ZSTD_isError(z.last_result)) fail(std::string("corrupt data: ") + ZSTD_getErrorName(z.last_result));
  }
  return output.pos;
}

std::string read_decompressed(const std::filesystem::path& path) {
  CompressedFileReader in(path);
  std::string content;
  std::vector<char> buffer(1 << 20);
  while (const size_t got = in.read(buffer.data(), buffer.size())) content.append(buffer.data(), got);
  return content;
}

bool LineReader::next(std::string& line) {
  line.clear();
  for (;;) {
    const void* newline = std::memchr(buffer_.data() + begin_, '\n', end_ - begin_);
    if (newline) {
      const size_t stop = static_cast<size_t>(static_cast<const char*>(newline) - buffer_.data());
      line.append(buffer_.data() + begin_, stop - begin_);
      begin_ = stop + 1;
      ++line_number_;
      return true;
    }
    line.append(buffer_.data() + begin_, end_ - begin_);
    begin_ = end_ = 0;
    if (eof_) break;
    end_ = in_.read(buffer_.data(), buffer_.size());
    eof_ = end_ == 0;
  }
  if (line.empty()) return false;
  ++line_number_;  // a last line without '\n'
  return true;
}

}  // namespace linea::data

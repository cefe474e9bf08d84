#include "data/parquet_codecs.h"

#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "data/parquet_metadata.h"

namespace linea::data::parquet {

namespace {

constexpr size_t kGrowBytes = 1 << 20;  // output grows by this much at least, else doubles

[[noreturn]] void corrupt(const std::string& codec, const std::string& what) {
  throw std::runtime_error(codec + " data is corrupt: " + what);
}

void check_size(const char* codec, size_t got, size_t expected) {
  if (got != expected) {
    corrupt(codec, "it holds " + std::to_string(got) + " bytes, the page header says " + std::to_string(expected));
  }
}

// Makes room for more output, up to expected + 1 bytes: one byte more than the page should hold,
// so that a stream that holds more is caught.
void grow(std::vector<uint8_t>& out, size_t expected, const char* codec) {
  if (out.size() > expected)
    corrupt(codec, "it holds more than the " + std::to_string(expected) + " bytes of the page");
  out.resize(std::min(expected + 1, out.size() + std::max(kGrowBytes, out.size())));
}

void gunzip(std::span<const uint8_t> in, size_t expected, std::vector<uint8_t>& out) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) throw std::runtime_error("zlib: inflateInit2 failed");
  const std::unique_ptr<z_stream, int (*)(z_stream*)> end(&z, inflateEnd);
  z.next_in = const_cast<Bytef*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  size_t produced = 0;
  for (;;) {
    if (produced == out.size()) grow(out, expected, "GZIP");
    z.next_out = out.data() + produced;
    z.avail_out = static_cast<uInt>(out.size() - produced);
    const int rc = inflate(&z, Z_NO_FLUSH);
    produced = out.size() - z.avail_out;
    if (rc == Z_STREAM_END) {
      if (z.avail_in == 0) break;
      if (inflateReset(&z) != Z_OK) corrupt("GZIP", "cannot start the next member");  // another member
    } else if (rc == Z_BUF_ERROR && z.avail_in == 0) {
      corrupt("GZIP", "the stream ends early");
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      corrupt("GZIP", z.msg ? z.msg : "inflate failed");
    }
  }
  out.resize(produced);
  check_size("GZIP", produced, expected);
}

void unzstd(std::span<const uint8_t> in, size_t expected, std::vector<uint8_t>& out) {
  const std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  ZSTD_inBuffer input{in.data(), in.size(), 0};
  size_t produced = 0;
  size_t last = 0;
  for (;;) {
    if (produced == out.size()) grow(out, expected, "ZSTD");
    ZSTD_outBuffer output{out.data(), out.size(), produced};
    last = ZSTD_decompressStream(ctx.get(), &output, &input);
    if (ZSTD_isError(last)) corrupt("ZSTD", ZSTD_getErrorName(last));
    produced = output.pos;
    if (input.pos == input.size && produced < out.size()) break;  // all read, nothing left to flush
  }
  if (last != 0) corrupt("ZSTD", "the last frame is incomplete");
  out.resize(produced);
  check_size("ZSTD", produced, expected);
}

}  // namespace

bool codec_supported(int32_t codec) {
  return codec == kUncompressed || codec == kSnappy || codec == kGzip || codec == kZstd;
}

std::span<const uint8_t> decompress(int32_t codec, std::span<const uint8_t> in, size_t expected,
                                    std::vector<uint8_t>& buffer) {
  buffer.clear();
  switch (codec) {
    case kUncompressed: check_size("UNCOMPRESSED", in.size(), expected); return in;
    case kSnappy: {
      const auto* src = reinterpret_cast<const char*>(in.data());
      size_t length = 0;
      if (!snappy::GetUncompressedLength(src, in.size(), &length)) corrupt("SNAPPY", "bad length header");
      check_size("SNAPPY", length, expected);
      buffer.resize(length);
      if (!snappy::RawUncompress(src, in.size(), reinterpret_cast<char*>(buffer.data()))) {
        corrupt("SNAPPY", "RawUncompress failed");
      }
      return buffer;
    }
    case kGzip: gunzip(in, expected, buffer); return buffer;
    case kZstd: unzstd(in, expected, buffer); return buffer;
    default:
      throw std::runtime_error("unsupported compression codec " + codec_name(codec) +
                               " (linea reads UNCOMPRESSED, SNAPPY, GZIP and ZSTD)");
  }
}

}  // namespace linea::data::parquet

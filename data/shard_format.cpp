#include "data/shard_format.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace linea::data {

static_assert(std::endian::native == std::endian::little, "shards are little-endian; so must the host be");

namespace {

uint32_t crc32_update(uint32_t crc, const void* data, size_t nbytes) {
  return static_cast<uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), nbytes));
}

std::array<int32_t, kShardHeaderInts> make_header(TokenWidth width, int64_t tokens) {
  std::array<int32_t, kShardHeaderInts> header{};
  header[0] = width == TokenWidth::u16 ? kShardMagicU16 : kShardMagicU32;
  header[1] = width == TokenWidth::u16 ? kShardVersionU16 : kShardVersionU32;
  header[2] = static_cast<int32_t>(tokens);
  return header;
}

}  // namespace

TokenWidth token_width_for_vocab(int64_t vocab_size) {
  if (vocab_size <= 0 || vocab_size > std::numeric_limits<int32_t>::max()) {
    throw std::invalid_argument("vocabulary size " + std::to_string(vocab_size) + " is not in [1, 2^31)");
  }
  return vocab_size <= 65536 ? TokenWidth::u16 : TokenWidth::u32;
}

std::string crc32_hex(uint32_t crc) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", crc);
  return text;
}

// ---------------------------------------------------------------------------------------------
// ShardWriter: header placeholder, tokens streamed after it, header patched by finish(). The file's
// CRC is assembled as crc32_combine(CRC(header), CRC(tokens), token bytes), so tokens are hashed
// once, as they are written.

ShardWriter::ShardWriter(std::filesystem::path path, TokenWidth width)
    : file_(std::move(path)), width_(width), tokens_crc_(crc32_update(0, nullptr, 0)) {
  const auto header = make_header(width_, 0);
  file_.write(header.data(), sizeof header);
}

void ShardWriter::append(std::span<const int32_t> ids) {
  if (tokens_ + static_cast<int64_t>(ids.size()) > kMaxShardTokens) {
    throw std::invalid_argument("shard " + file_.target().string() + " would exceed " +
                                std::to_string(kMaxShardTokens) + " tokens (its header count is an int32)");
  }
  const int64_t limit = width_ == TokenWidth::u16 ? 65536 : std::numeric_limits<int32_t>::max();
  for (int32_t id : ids) {
    if (id < 0 || id >= limit) {
      throw std::invalid_argument("shard " + file_.target().string() + ": token id " + std::to_string(id) +
                                  " does not fit a " + std::to_string(8 * token_bytes(width_)) + "-bit shard");
    }
  }
  if (width_ == TokenWidth::u32) {
    file_.write(ids.data(), ids.size_bytes());
    tokens_crc_ = crc32_update(tokens_crc_, ids.data(), ids.size_bytes());
  } else {
    std::vector<uint16_t> narrow(ids.begin(), ids.end());
    file_.write(narrow.data(), narrow.size() * 2);
    tokens_crc_ = crc32_update(tokens_crc_, narrow.data(), narrow.size() * 2);
  }
  tokens_ += static_cast<int64_t>(ids.size());
}

ShardSummary ShardWriter::finish() {
  const auto header = make_header(width_, tokens_);
  file_.write_at(0, header.data(), sizeof header);
  file_.commit();
  const uint32_t header_crc = crc32_update(crc32_update(0, nullptr, 0), header.data(), sizeof header);
  const auto token_len = static_cast<z_off64_t>(tokens_ * token_bytes(width_));
  return {tokens_, static_cast<uint32_t>(::crc32_combine64(header_crc, tokens_crc_, token_len))};
}

ShardSummary write_shard(const std::filesystem::path& path, std::span<const int32_t> ids, TokenWidth width) {
  ShardWriter writer(path, width);
  writer.append(ids);
  return writer.finish();
}

// ---------------------------------------------------------------------------------------------
// ShardReader

ShardReader::ShardReader(std::filesystem::path path) : path_(std::move(path)) {
  const std::string name = path_.string();
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("shard " + name + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw std::runtime_error("shard " + name + ": cannot stat (" + std::strerror(errno) + ")");
  }
  const auto file_bytes = static_cast<int64_t>(st.st_size);
  std::array<int32_t, kShardHeaderInts> header{};
  const ssize_t got = file_bytes >= kShardHeaderBytes ? ::pread(fd, header.data(), sizeof header, 0) : -1;
  if (got != static_cast<ssize_t>(sizeof header)) {
    ::close(fd);
    throw std::runtime_error("shard " + name + ": truncated header: expected at least " +
                             std::to_string(kShardHeaderBytes) + " bytes, the file has " + std::to_string(file_bytes));
  }
  auto reject = [&](const std::string& what) {
    ::close(fd);
    throw std::runtime_error("shard " + name + ": " + what);
  };
  if (header[0] == kShardMagicU16) {
    width_ = TokenWidth::u16;
    if (header[1] != kShardVersionU16) {
      reject("version " + std::to_string(header[1]) + " with uint16 magic " + std::to_string(kShardMagicU16) +
             ": expected version " + std::to_string(kShardVersionU16));
    }
  } else if (header[0] == kShardMagicU32) {
    width_ = TokenWidth::u32;
    if (header[1] != kShardVersionU32 && header[1] != kShardVersionU32Legacy) {
      reject("version " + std::to_string(header[1]) + " with uint32 magic " + std::to_string(kShardMagicU32) +
             ": expected version " + std::to_string(kShardVersionU32) + " (llm.c) or " +
             std::to_string(kShardVersionU32Legacy));
    }
  } else {
    reject("bad magic " + std::to_string(header[0]) + ": expected " + std::to_string(kShardMagicU16) +
           " (uint16 tokens) or " + std::to_string(kShardMagicU32) + " (uint32 tokens)");
  }
  num_tokens_ = header[2];
  if (num_tokens_ < 0) reject("negative token count " + std::to_string(num_tokens_) + " in header[2]");
  const int64_t expected = kShardHeaderBytes + num_tokens_ * token_bytes(width_);
  if (file_bytes < expected) {
    reject("truncated: header says " + std::to_string(num_tokens_) + " tokens, so " + std::to_string(expected) +
           " bytes, but the file has " + std::to_string(file_bytes));
  }
  if (file_bytes > expected) {
    reject("header says " + std::to_string(num_tokens_) + " tokens (" + std::to_string(expected) +
           " bytes) but the file has " + std::to_string(file_bytes - expected) + " extra bytes");
  }
  map_bytes_ = static_cast<size_t>(file_bytes);
  void* map = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) throw std::runtime_error("shard " + name + ": mmap failed (" + std::strerror(errno) + ")");
  map_ = static_cast<const unsigned char*>(map);
}

ShardReader::~ShardReader() {
  if (map_) ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
}

void ShardReader::read(int64_t begin, int64_t count, int32_t* out, int64_t vocab_size) const {
  if (begin < 0 || count < 0 || begin + count > num_tokens_) {
    throw std::out_of_range("shard " + path_.string() + ": tokens [" + std::to_string(begin) + ", " +
                            std::to_string(begin + count) + ") outside [0, " + std::to_string(num_tokens_) + ")");
  }
  const unsigned char* tokens = map_ + kShardHeaderBytes + begin * token_bytes(width_);
  uint32_t max_id = 0;
  if (width_ == TokenWidth::u16) {
    for (int64_t i = 0; i < count; ++i) {
      uint16_t id;
      std::memcpy(&id, tokens + 2 * i, 2);
      out[i] = id;
      max_id = std::max<uint32_t>(max_id, id);
    }
  } else {
    for (int64_t i = 0; i < count; ++i) {
      uint32_t id;
      std::memcpy(&id, tokens + 4 * i, 4);
      out[i] = static_cast<int32_t>(id);
      max_id = std::max(max_id, id);
    }
  }
  if (static_cast<int64_t>(max_id) < vocab_size) return;
  for (int64_t i = 0; i < count; ++i) {  // slow path only to name the offending token
    const uint32_t id = static_cast<uint32_t>(out[i]);
    if (static_cast<int64_t>(id) >= vocab_size) {
      throw std::runtime_error("shard " + path_.string() + ": token " + std::to_string(begin + i) + " has id " +
                               std::to_string(id) + ", expected an id < vocabulary size " + std::to_string(vocab_size));
    }
  }
}

uint32_t ShardReader::compute_crc32() const { return crc32_update(crc32_update(0, nullptr, 0), map_, map_bytes_); }

}  // namespace linea::data

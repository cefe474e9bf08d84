// Token shards in llm.c's `.bin` layout (dev/data/data_common.py, write_datafile), so shards made
// by llm.c's preprocessing (fineweb.py, for GPT-2 or LLaMA-3) load as they are:
//   int32 header[256]: header[0] magic, header[1] version, header[2] token count, the rest zero;
//   then `count` little-endian tokens: uint16 when magic = 20240520, version 1 ("gpt-2"),
//                                     uint32 when magic = 20240801, version 7 ("llama-3").
// Writers use uint16 when the vocabulary fits in 65536 ids, else uint32 (version 7). Readers also
// take uint32 shards of version 2, which linea wrote before it followed llm.c's version 7.
// The checksum of a shard is zlib's CRC-32 of the whole file (header and tokens), the value
// `python -c "import zlib,sys; print(zlib.crc32(open(sys.argv[1],'rb').read()))" FILE` prints.
// ShardWriter streams tokens into a file written atomically (see atomic_file.h); ShardReader maps a
// file read-only after checking magic, version and that the count matches the file size.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "data/atomic_file.h"

namespace linea::data {

inline constexpr int kShardHeaderInts = 256;
inline constexpr int64_t kShardHeaderBytes = kShardHeaderInts * 4;
inline constexpr int32_t kShardMagicU16 = 20240520;
inline constexpr int32_t kShardMagicU32 = 20240801;
inline constexpr int32_t kShardVersionU16 = 1;
inline constexpr int32_t kShardVersionU32 = 7;
inline constexpr int32_t kShardVersionU32Legacy = 2;   // read, never written
inline constexpr int64_t kMaxShardTokens = INT32_MAX;  // header[2] is an int32

enum class TokenWidth : uint8_t { u16 = 2, u32 = 4 };
// The narrowest width that holds ids in [0, vocab_size).
TokenWidth token_width_for_vocab(int64_t vocab_size);
inline int64_t token_bytes(TokenWidth w) { return static_cast<int64_t>(w); }

// What a finished shard is: its token count and whole-file CRC-32.
struct ShardSummary {
  int64_t tokens = 0;
  uint32_t crc32 = 0;
};

class ShardWriter {
 public:
  ShardWriter(std::filesystem::path path, TokenWidth width);
  // Appends ids; throws std::invalid_argument if an id does not fit the width or the shard would
  // exceed kMaxShardTokens.
  void append(std::span<const int32_t> ids);
  int64_t tokens() const { return tokens_; }
  // Writes the final header, fsyncs and renames the file into place.
  ShardSummary finish();

 private:
  AtomicFileWriter file_;
  TokenWidth width_;
  int64_t tokens_ = 0;
  uint32_t tokens_crc_;  // CRC-32 of the token bytes written so far
};

// Writes a whole shard at once.
ShardSummary write_shard(const std::filesystem::path& path, std::span<const int32_t> ids, TokenWidth width);

class ShardReader {
 public:
  // Throws std::runtime_error naming the file when it is missing, shorter than a header, has an
  // unknown magic or version, a negative count, or a size other than header + count × width.
  explicit ShardReader(std::filesystem::path path);
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  const std::filesystem::path& path() const { return path_; }
  int64_t num_tokens() const { return num_tokens_; }
  TokenWidth width() const { return width_; }
  // Copies tokens [begin, begin + count) to `out` as int32. Throws std::runtime_error naming the
  // file and the token index when an id is ≥ vocab_size.
  void read(int64_t begin, int64_t count, int32_t* out, int64_t vocab_size) const;
  // CRC-32 of the whole file (reads every byte).
  uint32_t compute_crc32() const;

 private:
  std::filesystem::path path_;
  int64_t num_tokens_ = 0;
  TokenWidth width_ = TokenWidth::u16;
  const unsigned char* map_ = nullptr;  // the whole file, header included
  size_t map_bytes_ = 0;
};

// "0x1a2b3c4d", the form manifests store.
std::string crc32_hex(uint32_t crc);

}  // namespace linea::data

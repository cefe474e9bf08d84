// ShardSetWriter: the token stream of one split cut into shards of exactly `shard_tokens` tokens
// (the last one shorter), named <prefix>_<split>_<index, 6 digits>.bin as llm.c names them, each
// written atomically (shard_format.h). A document may continue into the next shard, as in llm.c.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/manifest.h"
#include "data/shard_format.h"

namespace linea::data {

class ShardSetWriter {
 public:
  ShardSetWriter(std::filesystem::path dir, std::string prefix, Split split, TokenWidth width, int64_t shard_tokens);
  void append(std::span<const int32_t> ids);
  // Finishes the open shard; returns every shard written, for the manifest.
  std::vector<ManifestShard> finish();
  int64_t tokens() const { return tokens_; }

 private:
  void close_shard();
  std::filesystem::path dir_;
  std::string prefix_;
  Split split_;
  TokenWidth width_;
  int64_t shard_tokens_;
  int64_t tokens_ = 0;
  std::unique_ptr<ShardWriter> open_;
  std::string open_name_;
  std::vector<ManifestShard> done_;
};

}  // namespace linea::data

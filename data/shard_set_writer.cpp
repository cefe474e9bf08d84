#include "data/shard_set_writer.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace linea::data {

ShardSetWriter::ShardSetWriter(std::filesystem::path dir, std::string prefix, Split split, TokenWidth width,
                               int64_t shard_tokens)
    : dir_(std::move(dir)), prefix_(std::move(prefix)), split_(split), width_(width), shard_tokens_(shard_tokens) {
  if (shard_tokens_ <= 0 || shard_tokens_ > kMaxShardTokens) {
    throw std::invalid_argument("tokens per shard " + std::to_string(shard_tokens_) + ": expected an integer in [1, " +
                                std::to_string(kMaxShardTokens) + "]");
  }
}

void ShardSetWriter::append(std::span<const int32_t> ids) {
  while (!ids.empty()) {
    if (!open_) {
      char name[32];
      std::snprintf(name, sizeof name, "_%06zu.bin", done_.size());
      open_name_ = prefix_ + "_" + std::string(split_name(split_)) + name;
      open_ = std::make_unique<ShardWriter>(dir_ / open_name_, width_);
    }
    const auto n =
        static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(ids.size()), shard_tokens_ - open_->tokens()));
    open_->append(ids.first(n));
    tokens_ += static_cast<int64_t>(n);
    ids = ids.subspan(n);
    if (open_->tokens() == shard_tokens_) close_shard();
  }
}

void ShardSetWriter::close_shard() {
  const ShardSummary summary = open_->finish();
  done_.push_back({open_name_, split_, summary.tokens, summary.crc32});
  open_.reset();
}

std::vector<ManifestShard> ShardSetWriter::finish() {
  if (open_) close_shard();
  return done_;
}

}  // namespace linea::data

// Dataset: an opened shard directory. With a manifest.json (manifest.h) every listed shard is
// opened, its header count compared with the manifest and, when asked, its CRC-32 checked; without
// one the directory is read as plain llm.c output (infer_llmc_manifest) and the vocabulary size and
// EOS id come from DatasetOptions. Each split is a TokenStream: its shards, in manifest order, read
// as one array of tokens. Token ids are checked against the vocabulary size as they are read.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "data/manifest.h"
#include "data/shard_format.h"
#include "data/tokenizer.h"

namespace linea::data {

class TokenStream {
 public:
  TokenStream() = default;
  TokenStream(std::vector<std::unique_ptr<ShardReader>> shards, int64_t vocab_size);
  // Tokens held in memory (a streaming run's val split), already checked against the vocabulary.
  explicit TokenStream(std::vector<int32_t> tokens);

  int64_t num_tokens() const { return starts_.back(); }
  int64_t num_shards() const { return static_cast<int64_t>(shards_.size()); }
  // Copies tokens [begin, begin + count) to `out`, across shard boundaries. Throws
  // std::runtime_error naming the shard file for an id ≥ the vocabulary size.
  void read(int64_t begin, int64_t count, int32_t* out) const;

 private:
  std::vector<std::unique_ptr<ShardReader>> shards_;
  std::vector<int32_t> memory_;     // the tokens, when held in memory (then shards_ is empty)
  std::vector<int64_t> starts_{0};  // shard s covers [starts_[s], starts_[s + 1])
  int64_t vocab_size_ = 0;
};

struct DatasetOptions {
  // Used only for a directory without manifest.json (plain llm.c output), where they are required
  // (GPT-2 shards from llm.c's fineweb.py: vocabulary 50257, EOS 50256).
  int64_t vocab_size = 0;
  int32_t eos_id = -1;
  // Check every shard's CRC-32 against the manifest at open (reads every byte once, in parallel).
  bool verify_checksums = true;
};

class Dataset {
 public:
  // Throws std::runtime_error naming the file and what was expected for any inconsistency.
  static std::shared_ptr<const Dataset> open(const std::filesystem::path& dir, const DatasetOptions& options = {});

  const std::filesystem::path& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }
  int64_t vocab_size() const { return manifest_.vocab_size; }
  int32_t eos_id() const { return manifest_.eos_id; }
  const TokenStream& split(Split s) const { return s == Split::train ? train_ : val_; }
  // The tokenizer the manifest names; throws when it names none (llm.c directory).
  std::unique_ptr<Tokenizer> tokenizer() const;

 private:
  std::filesystem::path dir_;
  Manifest manifest_;
  TokenStream train_, val_;
};

}  // namespace linea::data

#include "data/dataset.h"

#include <algorithm>
#include <exception>
#include <stdexcept>

namespace linea::data {

TokenStream::TokenStream(std::vector<std::unique_ptr<ShardReader>> shards, int64_t vocab_size)
    : shards_(std::move(shards)), vocab_size_(vocab_size) {
  for (const auto& s : shards_) starts_.push_back(starts_.back() + s->num_tokens());
}

TokenStream::TokenStream(std::vector<int32_t> tokens) : memory_(std::move(tokens)) {
  starts_.push_back(static_cast<int64_t>(memory_.size()));
}

void TokenStream::read(int64_t begin, int64_t count, int32_t* out) const {
  if (begin < 0 || count < 0 || begin + count > num_tokens()) {
    throw std::out_of_range("token stream: tokens [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
                            ") outside [0, " + std::to_string(num_tokens()) + ")");
  }
  if (shards_.empty()) {
    std::copy(memory_.begin() + begin, memory_.begin() + begin + count, out);
    return;
  }
  // The shard holding `begin`: the last one starting at or before it (empty shards are skipped).
  auto s = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin()) - 1;
  while (count > 0) {
    const int64_t local = begin - starts_[s];
    const int64_t n = std::min(count, starts_[s + 1] - begin);
    shards_[s]->read(local, n, out, vocab_size_);
    out += n;
    begin += n;
    count -= n;
    ++s;
  }
}

std::shared_ptr<const Dataset> Dataset::open(const std::filesystem::path& dir, const DatasetOptions& options) {
  auto ds = std::make_shared<Dataset>();
  ds->dir_ = dir;
  const bool has_manifest = std::filesystem::exists(dir / kManifestFile);
  ds->manifest_ = has_manifest ? Manifest::load(dir) : infer_llmc_manifest(dir, options.vocab_size, options.eos_id);
  const Manifest& m = ds->manifest_;
  const std::string manifest_name = (dir / kManifestFile).string();

  std::vector<std::unique_ptr<ShardReader>> readers;
  for (const auto& entry : m.shards) {
    auto reader = std::make_unique<ShardReader>(dir / entry.file);
    if (reader->num_tokens() != entry.tokens) {
      throw std::runtime_error("shard " + reader->path().string() + ": header says " +
                               std::to_string(reader->num_tokens()) + " tokens, " + manifest_name + " says " +
                               std::to_string(entry.tokens));
    }
    readers.push_back(std::move(reader));
  }
  if (options.verify_checksums) {
    std::vector<std::exception_ptr> errors(readers.size());
#pragma omp parallel for schedule(dynamic)
    for (size_t i = 0; i < readers.size(); ++i) {
      const auto& expected = m.shards[i].crc32;
      if (!expected) continue;
      const uint32_t actual = readers[i]->compute_crc32();
      if (actual != *expected) {
        errors[i] = std::make_exception_ptr(std::runtime_error(
            "shard " + readers[i]->path().string() + ": checksum mismatch: CRC-32 is " + crc32_hex(actual) + ", " +
            manifest_name + " expects " + crc32_hex(*expected) + " (the file is corrupt or was changed)"));
      }
    }
    for (const auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  }
  std::vector<std::unique_ptr<ShardReader>> train, val;
  for (size_t i = 0; i < readers.size(); ++i) {
    (m.shards[i].split == Split::train ? train : val).push_back(std::move(readers[i]));
  }
  ds->train_ = TokenStream(std::move(train), m.vocab_size);
  ds->val_ = TokenStream(std::move(val), m.vocab_size);
  if (ds->train_.num_tokens() == 0) {
    throw std::runtime_error("shard directory " + dir.string() + " has no training tokens");
  }
  return ds;
}

std::unique_ptr<Tokenizer> Dataset::tokenizer() const {
  if (manifest_.tokenizer.kind.empty()) {
    throw std::runtime_error("shard directory " + dir_.string() + " names no tokenizer (it has no manifest.json)");
  }
  return load_tokenizer(manifest_.tokenizer, dir_);
}

}  // namespace linea::data

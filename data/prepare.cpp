#include "data/prepare.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <future>
#include <memory>
#include <stdexcept>
#include <vector>

#include "data/atomic_file.h"
#include "data/gpt2_bpe_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "data/manifest.h"
#include "data/progress_meter.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/shard_set_writer.h"
#include "data/tiktoken_tokenizer.h"

namespace linea::data {

namespace {

constexpr int64_t kRoundBytesPerThread = 4 << 20;  // text tokenized per thread between writes

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class ValSplit {
 public:
  explicit ValSplit(const PrepareOptions& o) : val_docs_(o.val_docs), fraction_(o.val_fraction) {}
  bool is_val(int64_t doc) const {
    if (val_docs_ > 0) return doc < val_docs_;
    const auto i = static_cast<double>(doc);
    return std::floor((i + 1) * fraction_) > std::floor(i * fraction_);
  }

 private:
  int64_t val_docs_;
  double fraction_;
};

void validate(const PrepareOptions& o) {
  if (o.output.empty()) throw std::invalid_argument("--output: an output directory is required");
  if (o.val_docs < 0) throw std::invalid_argument("--val-docs: expected a count ≥ 0");
  if (!(o.val_fraction >= 0 && o.val_fraction < 1)) throw std::invalid_argument("--val-fraction: expected [0, 1)");
  if (o.val_docs > 0 && o.val_fraction > 0) {
    throw std::invalid_argument("--val-docs and --val-fraction: give at most one of them");
  }
  if (o.threads < 1) throw std::invalid_argument("--threads: expected at least 1");
  if (o.shard_tokens < 1 || o.shard_tokens > kMaxShardTokens) {
    throw std::invalid_argument("--shard-tokens: expected an integer in [1, " + std::to_string(kMaxShardTokens) + "]");
  }
  if (o.spm_sample_bytes < 1) throw std::invalid_argument("--spm-sample-mb: expected a positive size");
  if (o.spm_model_type != "unigram" && o.spm_model_type != "bpe") {
    throw std::invalid_argument("--spm-model-type: expected unigram or bpe, got \"" + o.spm_model_type + "\"");
  }
  if (std::filesystem::exists(o.output) &&
      (!std::filesystem::is_directory(o.output) || !std::filesystem::is_empty(o.output))) {
    throw std::invalid_argument("--output " + o.output.string() +
                                ": already exists and is not an empty directory; nothing is overwritten");
  }
}

// Removes the partial output directory unless release() is called.
class PartialDirectory {
 public:
  explicit PartialDirectory(std::filesystem::path path) : path_(std::move(path)) {
    std::filesystem::create_directories(path_);
  }
  ~PartialDirectory() {
    if (!path_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(path_, ignored);
    }
  }
  const std::filesystem::path& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  std::filesystem::path path_;
};

// Lines of the first train documents, up to `bytes` of text, for SentencePiece training.
std::vector<std::string> sample_sentences(DocumentSource& source, const ValSplit& split, int64_t bytes) {
  std::vector<std::string> sentences;
  std::string doc;
  int64_t taken = 0;
  for (int64_t i = 0; taken < bytes && source.next(doc); ++i) {
    if (split.is_val(i)) continue;
    size_t begin = 0;
    while (begin < doc.size()) {
      size_t end = doc.find('\n', begin);
      if (end == std::string::npos) end = doc.size();
      if (doc.find_first_not_of(" \t\r", begin) < end) {
        sentences.emplace_back(doc, begin, end - begin);
        taken += static_cast<int64_t>(end - begin);
      }
      begin = end + 1;
    }
  }
  return sentences;
}

// Puts the tokenizer's files into `dir` and returns the tokenizer and its manifest entry.
std::unique_ptr<Tokenizer> install_tokenizer(const PrepareOptions& o, const DocumentSourceFactory& documents,
                                             const std::filesystem::path& dir, TokenizerSpec& spec) {
  if (o.tokenizer.kind != TokenizerChoice::Kind::spm_train) {
    auto tok = o.tokenizer.load();
    spec.kind = std::string(tok->kind());
    if (o.tokenizer.kind == TokenizerChoice::Kind::gpt2) {
      spec.path = "gpt2";
      std::filesystem::create_directories(dir / spec.path);
      for (const char* file : {"vocab.json", "merges.txt"}) {
        write_file_atomically(dir / spec.path / file, read_file(o.tokenizer.path / file));
      }
    } else {
      spec.path = o.tokenizer.kind == TokenizerChoice::Kind::spm_model ? "tokenizer.model"
                  : o.tokenizer.kind == TokenizerChoice::Kind::hf      ? "tokenizer.json"
                                                                       : "tokenizer.tiktoken";
      write_file_atomically(dir / spec.path, read_file(o.tokenizer.path));
    }
    return tok;
  }
  // spm-train: learn a model from the first train documents.
  auto source = documents();
  const auto sentences = sample_sentences(*source, ValSplit(o), o.spm_sample_bytes);
  if (sentences.empty()) throw std::runtime_error("spm-train: the inputs hold no training text");
  if (o.progress) {
    std::fprintf(stderr, "prepare: training a SentencePiece %s model (vocabulary %d) on %zu lines...\n",
                 o.spm_model_type.c_str(), o.tokenizer.vocab_size, sentences.size());
  }
  SentencePieceTrainOptions train;
  train.vocab_size = o.tokenizer.vocab_size;
  train.model_type = o.spm_model_type;
  train.threads = o.threads;
  train.seed = o.seed;
  auto tok = std::make_unique<SentencePieceTokenizer>(train_sentencepiece(sentences, train), "trained model");
  spec = {SentencePieceTokenizer::kKind, "tokenizer.model"};
  write_file_atomically(dir / spec.path, tok->serialized_model());
  return tok;
}

}  // namespace

TokenizerChoice TokenizerChoice::parse(const std::string& text, const std::string& flag) {
  const std::string prefix = flag.empty() ? "" : flag + ": ";
  const auto bad = [&]() -> std::invalid_argument {
    return std::invalid_argument(prefix +
                                 "expected spm:MODEL, spm-train:VOCAB_SIZE, gpt2:DIR, hf:PATH/tokenizer.json or "
                                 "tiktoken:PATH.tiktoken[:cl100k|o200k|llama3], got \"" +
                                 text + "\"");
  };
  const size_t colon = text.find(':');
  if (colon == std::string::npos || colon + 1 == text.size()) throw bad();
  const std::string kind = text.substr(0, colon), value = text.substr(colon + 1);
  TokenizerChoice c;
  c.path = value;
  if (kind == "spm") {
    c.kind = Kind::spm_model;
  } else if (kind == "gpt2") {
    c.kind = Kind::gpt2;
  } else if (kind == "hf") {
    c.kind = Kind::hf;
  } else if (kind == "tiktoken") {
    c.kind = Kind::tiktoken;
    const size_t last = value.rfind(':');
    if (last != std::string::npos) {
      const std::string variant = value.substr(last + 1);
      c.variant = pattern_from_name(variant);
      if (!c.variant || *c.variant == PretokenizerPattern::gpt2) {
        throw std::invalid_argument(prefix + text + ": unknown tiktoken encoding \"" + variant +
                                    "\"; expected cl100k, o200k or llama3");
      }
      c.path = value.substr(0, last);
    }
  } else if (kind == "spm-train") {
    c.kind = Kind::spm_train;
    c.path.clear();
    size_t used = 0;
    try {
      c.vocab_size = std::stoi(value, &used);
    } catch (const std::exception&) {
      throw bad();
    }
    if (used != value.size() || c.vocab_size < 300) {
      throw std::invalid_argument(prefix + "spm-train: vocabulary size \"" + value + "\": expected an integer ≥ 300");
    }
  } else {
    throw bad();
  }
  return c;
}

std::unique_ptr<Tokenizer> TokenizerChoice::load() const {
  switch (kind) {
    case Kind::spm_model: return std::make_unique<SentencePieceTokenizer>(path);
    case Kind::gpt2: return std::make_unique<Gpt2BpeTokenizer>(path);
    case Kind::hf: return std::make_unique<HfTokenizer>(path);
    case Kind::tiktoken: return std::make_unique<TiktokenTokenizer>(path, variant);
    case Kind::spm_train: break;
  }
  throw std::invalid_argument("spm-train: a tokenizer to train, not one to load");
}

PrepareSummary prepare_corpus(const DocumentSourceFactory& documents, const PrepareOptions& o) {
  validate(o);
  std::filesystem::path output = std::filesystem::absolute(o.output).lexically_normal();
  if (!output.has_filename()) output = output.parent_path();  // "out/" names "out"
  PartialDirectory partial(output.parent_path() /
                           (output.filename().string() + ".partial-" + std::to_string(::getpid())));
  PrepareSummary summary;

  auto start = std::chrono::steady_clock::now();
  Manifest manifest;
  const auto tokenizer = install_tokenizer(o, documents, partial.path(), manifest.tokenizer);
  manifest.vocab_size = tokenizer->vocab_size();
  manifest.eos_id = tokenizer->eos_id();
  summary.vocab_size = tokenizer->vocab_size();
  summary.tokenizer_seconds = seconds_since(start);

  start = std::chrono::steady_clock::now();
  const TokenWidth width = token_width_for_vocab(manifest.vocab_size);
  ShardSetWriter train(partial.path(), o.shard_prefix, Split::train, width, o.shard_tokens);
  ShardSetWriter val(partial.path(), o.shard_prefix, Split::val, width, o.shard_tokens);
  const ValSplit split(o);
  ProgressMeter progress("prepare", o.progress);
  const int64_t round_bytes = kRoundBytesPerThread * o.threads;

  auto source = documents();
  std::vector<std::vector<int32_t>> encoded;
  int64_t doc_index = 0;
  // Rounds of documents: the next round is read on another thread while this one is tokenized.
  struct Round {
    std::vector<std::string> docs;
    int64_t bytes = 0;
    bool last = false;
    double fraction = -1;  // of the input read after it
  };
  const auto read_round = [&source, round_bytes] {
    Round r;
    std::string doc;
    while (r.bytes < round_bytes && !(r.last = !source->next(doc))) {
      r.bytes += static_cast<int64_t>(doc.size());
      r.docs.push_back(std::move(doc));
    }
    r.fraction = source->fraction_read();
    return r;
  };
  std::future<Round> reading = std::async(std::launch::async, read_round);
  for (bool last = false; !last;) {
    Round round = reading.get();
    last = round.last;
    if (!last) reading = std::async(std::launch::async, read_round);
    const std::vector<std::string>& docs = round.docs;
    encoded.resize(docs.size());
    std::vector<std::exception_ptr> errors(docs.size());
#pragma omp parallel for num_threads(o.threads) schedule(dynamic, 1)
    for (size_t i = 0; i < docs.size(); ++i) {
      try {
        encoded[i].assign(1, tokenizer->eos_id());
        const std::vector<int32_t> ids = tokenizer->encode(docs[i]);
        encoded[i].insert(encoded[i].end(), ids.begin(), ids.end());
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
    for (size_t i = 0; i < docs.size(); ++i, ++doc_index) {
      if (errors[i]) std::rethrow_exception(errors[i]);
      const bool is_val = split.is_val(doc_index);
      (is_val ? val : train).append(encoded[i]);
      ++(is_val ? summary.val_docs : summary.train_docs);
    }
    summary.text_bytes += round.bytes;
    progress.update(doc_index, train.tokens() + val.tokens(), summary.text_bytes, round.fraction);
  }
  if (train.tokens() == 0) {
    throw std::runtime_error("prepare: no training documents (" + std::to_string(summary.val_docs) +
                             " documents read, all went to validation)");
  }
  summary.train_tokens = train.tokens();
  summary.val_tokens = val.tokens();
  for (auto& s : train.finish()) manifest.shards.push_back(std::move(s));
  for (auto& s : val.finish()) manifest.shards.push_back(std::move(s));
  summary.shards = static_cast<int64_t>(manifest.shards.size());
  manifest.save(partial.path());
  summary.encode_seconds = progress.finish(doc_index, summary.train_tokens + summary.val_tokens, summary.text_bytes);

  std::filesystem::rename(partial.path(), output);
  partial.release();
  return summary;
}

}  // namespace linea::data

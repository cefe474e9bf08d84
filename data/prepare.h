// prepare: documents → tokenizer → shards + manifest (the logic behind `linea prepare`).
// Every document is written as [EOS, its tokens...] (EOS precedes each document, as llm.c's
// fineweb.py does), to the val or the train split, in source order whatever the thread count.
// Tokenization runs on `threads` threads over rounds of documents (the next round is read on
// another thread meanwhile); output order is fixed.
// The output directory is built as "<output>.partial-<pid>" beside it (shards written atomically,
// tokenizer files copied in, manifest.json last) and renamed to <output> at the end, so <output>
// is either absent or complete; a failed run removes its partial directory. <output> must not
// exist or be an empty directory.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "data/document_source.h"
#include "data/pretokenizer.h"
#include "data/tokenizer.h"

namespace linea::data {

struct TokenizerChoice {
  enum class Kind : uint8_t { spm_model, spm_train, gpt2, hf, tiktoken };
  Kind kind = Kind::spm_train;
  // spm_model: the .model file; gpt2: the directory of vocab.json, merges.txt; hf: a tokenizer.json;
  // tiktoken: a .tiktoken rank file.
  std::filesystem::path path;
  int vocab_size = 0;                          // spm_train
  std::optional<PretokenizerPattern> variant;  // tiktoken: cl100k, o200k or llama3 (none: from the file)
  // Parses "spm:MODEL", "spm-train:VOCAB_SIZE", "gpt2:DIR", "hf:PATH/tokenizer.json" or
  // "tiktoken:PATH.tiktoken[:cl100k|o200k|llama3]"; throws std::invalid_argument otherwise. `flag`
  // names the option in errors ("--tokenizer"; empty: none, for a caller that names it itself).
  static TokenizerChoice parse(const std::string& text, const std::string& flag = "--tokenizer");
  // Loads (or, for spm-train, cannot load: throws) the tokenizer it names.
  std::unique_ptr<Tokenizer> load() const;
};

struct PrepareOptions {
  std::filesystem::path output;
  TokenizerChoice tokenizer;
  int64_t shard_tokens = 100'000'000;
  // Validation documents, one of: the first `val_docs` documents, or a fraction f spread evenly
  // (document i is val when floor((i + 1)·f) > floor(i·f), i.e. every (1/f)-th document).
  int64_t val_docs = 0;
  double val_fraction = 0;
  int threads = 1;
  std::string shard_prefix = "corpus";
  int64_t spm_sample_bytes = 32 << 20;     // spm-train: text of the first train documents it learns from
  std::string spm_model_type = "unigram";  // spm-train: "unigram" or "bpe"
  uint32_t seed = 1;                       // spm-train
  bool progress = true;                    // progress line on stderr
};

struct PrepareSummary {
  int64_t train_docs = 0, val_docs = 0;
  int64_t train_tokens = 0, val_tokens = 0;
  int64_t text_bytes = 0;
  int64_t shards = 0;
  int32_t vocab_size = 0;
  double tokenizer_seconds = 0;  // loading or training the tokenizer
  double encode_seconds = 0;     // reading, tokenizing and writing
};

PrepareSummary prepare_corpus(const DocumentSourceFactory& documents, const PrepareOptions& options);

}  // namespace linea::data

// `linea prepare`: turns text files into token shards + manifest (data/prepare.h), or, with
// --default-corpus, builds the embedded default corpus (data/default_corpus.h).
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "data/default_corpus.h"
#include "data/document_source.h"
#include "data/prepare.h"

namespace linea::cli {
namespace {

constexpr const char* kUsage =
    R"(usage: linea prepare --input FILE|GLOB [--input ...] --output DIR --tokenizer SPEC [options]
       linea prepare --default-corpus [--output DIR] [--threads N]

Tokenizes text into llm.c-format shards (uint16 tokens when the vocabulary fits, else uint32,
llm.c's version 7) and a manifest.json. Every document is preceded by the EOS token.

inputs:
  *.parquet: the "text" column (FineWeb-Edu as published); snappy, gzip, zstd or uncompressed
  *.jsonl, *.json, *.ndjson (optionally .gz/.zst): one JSON object per line, document = its "text"
  any other name: plain text (gzip or zstd compressed or plain, detected from the first bytes), one
  document per blank-line-separated paragraph (--text-docs file: one document per file)

options:
  --input FILE|GLOB     input files; repeatable; globs are expanded and sorted
  --output DIR          output directory; must not exist or be empty
  --tokenizer SPEC      spm:MODEL (a SentencePiece .model), spm-train:VOCAB_SIZE (train a
                        SentencePiece unigram model on the first train documents), gpt2:DIR (GPT-2
                        byte-level BPE from DIR/vocab.json and DIR/merges.txt),
                        hf:PATH/tokenizer.json (a Hugging Face BPE tokenizer),
                        tiktoken:PATH.tiktoken[:cl100k|o200k|llama3] (a tiktoken rank file and the
                        regex and special tokens of that encoding; default: from the rank count)
  --where COND[,COND]   keep the parquet rows / JSON records whose numeric fields pass every
                        condition NAME OP NUMBER, OP one of >= > <= < == != (e.g. "int_score>=3");
                        repeatable; nulls do not pass
  --shard-tokens N      tokens per shard (default 100000000)
  --val-fraction F      every (1/F)-th document goes to the val split
  --val-docs N          the first N documents go to the val split
  --threads N           tokenizer threads, and parquet row groups decoded at once (default: all
                        cores); output is the same for any N
  --text-docs MODE      plain text: paragraph (default) or file
  --text-field NAME     JSONL field or parquet column holding the text (default "text")
  --name PREFIX         shard names PREFIX_train_000000.bin, ... (default "corpus")
  --spm-sample-mb N     spm-train: MB of text to train on (default 32)
  --spm-model-type T    spm-train: unigram (default) or bpe
  --seed N              spm-train seed (default 1)
  --quiet               no progress line
  --default-corpus      build the default corpus (GCIDE dictionary, SentencePiece 4096) in DIR, or in
                        $LINEA_CACHE/gcide-spm4096 (default ~/.cache/linea/gcide-spm4096)
)";

// Reads "--name value" and "--name=value" flags.
class FlagReader {
 public:
  FlagReader(int argc, char** argv) : args_(argv + 1, argv + argc) {}
  bool done() const { return i_ >= args_.size(); }
  // True when the current argument is `name` (a boolean flag or one taking a value).
  bool is(const std::string& name) {
    const std::string& a = args_[i_];
    if (a == name) {
      inline_value_.reset();
      return true;
    }
    if (a.rfind(name + "=", 0) == 0) {
      inline_value_ = a.substr(name.size() + 1);
      return true;
    }
    return false;
  }
  std::string value() {
    const std::string name = args_[i_].substr(0, args_[i_].find('='));
    if (inline_value_) {
      ++i_;
      return *inline_value_;
    }
    if (i_ + 1 >= args_.size()) throw std::invalid_argument(name + ": expected a value");
    i_ += 2;
    return args_[i_ - 1];
  }
  void skip() { ++i_; }
  const std::string& current() const { return args_[i_]; }

 private:
  std::vector<std::string> args_;
  size_t i_ = 0;
  std::optional<std::string> inline_value_;
};

int64_t parse_int(const std::string& flag, const std::string& text) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw std::invalid_argument(flag + ": expected an integer, got \"" + text + "\"");
  return v;
}

double parse_double(const std::string& flag, const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) throw std::invalid_argument(flag + ": expected a number, got \"" + text + "\"");
  return v;
}

int run_prepare(int argc, char** argv) {
  data::PrepareOptions options;
  options.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::string> inputs;
  std::string tokenizer;
  bool default_corpus = false;
  data::DocumentOptions documents;
  std::vector<std::string> where;
  for (FlagReader f(argc, argv); !f.done();) {
    if (f.is("--help") || f.is("-h")) {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (f.is("--input")) {
      inputs.push_back(f.value());
    } else if (f.is("--output")) {
      options.output = f.value();
    } else if (f.is("--tokenizer")) {
      tokenizer = f.value();
    } else if (f.is("--shard-tokens")) {
      options.shard_tokens = parse_int("--shard-tokens", f.value());
    } else if (f.is("--val-fraction")) {
      options.val_fraction = parse_double("--val-fraction", f.value());
    } else if (f.is("--val-docs")) {
      options.val_docs = parse_int("--val-docs", f.value());
    } else if (f.is("--threads")) {
      options.threads = static_cast<int>(parse_int("--threads", f.value()));
    } else if (f.is("--text-docs")) {
      const std::string mode = f.value();
      if (mode != "paragraph" && mode != "file") {
        throw std::invalid_argument("--text-docs: expected paragraph or file, got \"" + mode + "\"");
      }
      documents.text_documents = mode == "file" ? data::TextDocuments::file : data::TextDocuments::paragraph;
    } else if (f.is("--text-field")) {
      documents.text_field = f.value();
    } else if (f.is("--where")) {
      where.push_back(f.value());
    } else if (f.is("--name")) {
      options.shard_prefix = f.value();
    } else if (f.is("--spm-sample-mb")) {
      options.spm_sample_bytes = parse_int("--spm-sample-mb", f.value()) << 20;
    } else if (f.is("--spm-model-type")) {
      options.spm_model_type = f.value();
    } else if (f.is("--seed")) {
      options.seed = static_cast<uint32_t>(parse_int("--seed", f.value()));
    } else if (f.is("--quiet")) {
      options.progress = false;
      f.skip();
    } else if (f.is("--default-corpus")) {
      default_corpus = true;
      f.skip();
    } else {
      throw std::invalid_argument("unknown option \"" + f.current() + "\" (see linea prepare --help)");
    }
  }

  if (default_corpus) {
    data::DefaultCorpusOptions corpus;
    corpus.dir = options.output;
    corpus.threads = options.threads;
    corpus.progress = options.progress;
    const auto dir = data::ensure_default_corpus(corpus);
    std::printf("default corpus ready in %s\n", dir.c_str());
    return 0;
  }
  if (tokenizer.empty()) throw std::invalid_argument("--tokenizer: required (see linea prepare --help)");
  options.tokenizer = data::TokenizerChoice::parse(tokenizer);
  const auto files = data::expand_inputs(inputs);
  documents.filter = data::RowFilter::parse(where);
  documents.threads = options.threads;
  const auto summary =
      data::prepare_corpus([&] { return std::make_unique<data::FileDocumentSource>(files, documents); }, options);
  const double mb = static_cast<double>(summary.text_bytes) / 1e6;
  std::printf(
      "prepared %s: %lld train docs / %lld tokens, %lld val docs / %lld tokens, %lld shards, vocabulary %d\n"
      "tokenizer %.1f s; %.1f MB of text tokenized in %.3f s (%.1f MB/s, %.0f tokens/s)\n",
      options.output.c_str(), static_cast<long long>(summary.train_docs), static_cast<long long>(summary.train_tokens),
      static_cast<long long>(summary.val_docs), static_cast<long long>(summary.val_tokens),
      static_cast<long long>(summary.shards), summary.vocab_size, summary.tokenizer_seconds, mb, summary.encode_seconds,
      mb / summary.encode_seconds,
      static_cast<double>(summary.train_tokens + summary.val_tokens) / summary.encode_seconds);
  return 0;
}

const CommandRegistration kPrepare({"prepare", "tokenize text into shards + manifest (or build the default corpus)",
                                    run_prepare});

}  // namespace
}  // namespace linea::cli

// `linea prepare`: turns text files into token shards + manifest (data/prepare.h), or, with
// --default-corpus, builds the embedded default corpus (data/default_corpus.h).
#include <algorithm>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "cli/command_line.h"
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

int run_prepare(int argc, char** argv) {
  CommandLine flags("prepare", kUsage);
  flags.option({"output", "tokenizer", "shard-tokens", "val-fraction", "val-docs", "threads", "text-docs", "text-field",
                "name", "spm-sample-mb", "spm-model-type", "seed"});
  flags.list("input").list("where").flag("quiet").flag("default-corpus");
  if (const auto done = flags.parse(argc, argv)) return *done;
  data::PrepareOptions options;
  options.output = flags.string("output", "");
  options.shard_tokens = flags.integer("shard-tokens", options.shard_tokens);
  options.val_fraction = flags.number("val-fraction", options.val_fraction);
  options.val_docs = flags.integer("val-docs", options.val_docs);
  options.threads = static_cast<int>(
      flags.integer("threads", std::max(1u, std::thread::hardware_concurrency()), 1, std::numeric_limits<int>::max()));
  options.shard_prefix = flags.string("name", options.shard_prefix);
  if (flags.has("spm-sample-mb"))
    options.spm_sample_bytes = flags.integer("spm-sample-mb", 0, 1, int64_t(1) << 40) << 20;
  options.spm_model_type = flags.string("spm-model-type", options.spm_model_type);
  options.seed = static_cast<uint32_t>(flags.integer("seed", options.seed, 0, std::numeric_limits<uint32_t>::max()));
  options.progress = !flags.has("quiet");
  data::DocumentOptions documents;
  documents.text_documents = flags.choice("text-docs", "paragraph", {"paragraph", "file"}) == "file"
                                 ? data::TextDocuments::file
                                 : data::TextDocuments::paragraph;
  documents.text_field = flags.string("text-field", documents.text_field);

  if (flags.has("default-corpus")) {
    data::DefaultCorpusOptions corpus;
    corpus.dir = options.output;
    corpus.threads = options.threads;
    corpus.progress = options.progress;
    const auto dir = data::ensure_default_corpus(corpus);
    std::printf("default corpus ready in %s\n", dir.c_str());
    return 0;
  }
  flags.require({"tokenizer"});
  options.tokenizer = data::TokenizerChoice::parse(*flags.get("tokenizer"));
  const auto files = data::expand_inputs(flags.all("input"));
  documents.filter = data::RowFilter::parse(flags.all("where"));
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

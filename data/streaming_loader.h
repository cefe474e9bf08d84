// StreamingLoader: training batches straight from parquet files (`data.path = "parquet:GLOB"`),
// tokenized as they stream in, by background threads, in one global order for any number of ranks.
//
// The documents (ParquetDocuments: files in sorted order, row groups, rows; the text column; rows
// that pass the filter) are split as `linea prepare --val-docs N` splits them: the first N are the
// val split (tokenized at the start and held in memory); the others form the train stream
// [EOS, tokens of document]…, the very tokens prepare writes into its train shards. Window w of an
// epoch is stream tokens [w·T, w·T + T + 1); global step g takes windows [g·G, (g + 1)·G) in order
// (no shuffle: the files' order is the training order; FineWeb-Edu's files are shuffled already),
// and rank r of R its contiguous share in micro-batches of B sequences, as Loader (loader.h) does.
// When the stream ends before a step's G windows are there, the epoch ends (those windows are not
// used) and the next one starts again from the first train document.
//
// Every rank reads and tokenizes the whole stream (where a window starts depends on every token
// before it) and keeps its share. A background thread keeps `prefetch` micro-batches ready,
// tokenizing with `threads` threads and decoding `threads` row groups at a time.
//
// Position (what a checkpoint saves): the global step and micro-step and where the step's first
// window begins in the files (file, row group, row, and token within that document's
// [EOS, tokens…]), with what the stream is made of: the files (count and a CRC-32 of their names
// and sizes), text column, filter, tokenizer (kind, vocabulary, EOS), val documents, T and G. A
// resumed run seeks there and continues with exactly the next batch; a position of another stream
// is refused, naming what differs. At a step boundary (micro_step 0) R and B may differ.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
#include "data/parquet_documents.h"
#include "data/tokenizer.h"
#include "data/training_batches.h"

namespace linea::data {

struct StreamingConfig {
  std::vector<std::filesystem::path> files;
  ParquetOptions parquet;  // text column, filter, row groups decoded at once (threads)
  std::shared_ptr<const Tokenizer> tokenizer;
  int64_t val_docs = 0;
  int threads = 2;  // tokenizer threads
  LoaderConfig loader;
};

// Where a step's first window begins: a document and a token of its [EOS, tokens...].
struct StreamPosition {
  int64_t epoch = 0, step = 0, micro_step = 0;
  DocumentLocation document;
  int64_t token = 0;
};

class StreamingLoader : public TrainingBatches {
 public:
  // Reads and tokenizes the val documents, then starts the background thread. Throws
  // std::invalid_argument naming the field when the configuration does not fit (no train
  // documents, G not divisible by R·B, ...), std::runtime_error naming the file on bad input.
  explicit StreamingLoader(StreamingConfig config);
  ~StreamingLoader() override;
  StreamingLoader(const StreamingLoader&) = delete;
  StreamingLoader& operator=(const StreamingLoader&) = delete;

  TokenBatch next() override;
  int64_t micro_steps_per_step() const override { return micro_steps_; }
  nlohmann::json position() const override;
  void check_position(const nlohmann::json& position, const std::string& source) const override;
  void seek(const nlohmann::json& position, const std::string& source) override;
  std::string describe() const override;

  StreamPosition stream_position() const;
  // The val split's tokens ([EOS, tokens…] per val document), for a ValidationIterator.
  std::shared_ptr<const TokenStream> val_stream() const { return val_; }
  int32_t vocab_size() const { return config_.tokenizer->vocab_size(); }
  int32_t eos_id() const { return config_.tokenizer->eos_id(); }

 private:
  struct Ready {
    TokenBatch batch;
    StreamPosition next;  // the position after this batch
  };
  class Producer;
  nlohmann::json identity() const;  // what the stream is made of
  StreamPosition parse(const nlohmann::json& position, const std::string& source) const;
  void start(const StreamPosition& from);
  void stop();

  StreamingConfig config_;
  int64_t micro_steps_ = 0;
  uint32_t files_crc_ = 0;
  std::shared_ptr<const TokenStream> val_;
  DocumentLocation train_start_;  // the first train document

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Ready> ready_;
  StreamPosition consumer_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace linea::data

#include "data/streaming_loader.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "data/shard_format.h"

namespace linea::data {

namespace {

constexpr int64_t kChunkBytesPerThread = 1 << 20;  // text tokenized per thread at a time
constexpr const char* kKind = "parquet-stream";

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

// [EOS, tokens...] of each document, tokenized on `threads` threads, in order.
std::vector<std::vector<int32_t>> tokenize(const Tokenizer& tok, const std::vector<std::string>& docs, int threads) {
  std::vector<std::vector<int32_t>> out(docs.size());
  std::vector<std::exception_ptr> errors(docs.size());
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (size_t i = 0; i < docs.size(); ++i) {
    try {
      out[i].assign(1, tok.eos_id());
      const std::vector<int32_t> ids = tok.encode(docs[i]);
      out[i].insert(out[i].end(), ids.begin(), ids.end());
    } catch (...) {
      errors[i] = std::current_exception();
    }
  }
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Producer: the train stream from a position on, as a window of buffered tokens. The cursor is the
// next step's first token; the buffer keeps the documents from the one holding the cursor.

class StreamingLoader::Producer {
 public:
  Producer(const StreamingConfig& c, DocumentLocation train_start)
      : reader_(c.files, c.parquet), tok_(*c.tokenizer), threads_(c.threads), train_start_(train_start) {}

  void seek(const DocumentLocation& document, int64_t token) {
    reader_.seek(document);
    buffer_.clear();
    docs_.clear();
    cursor_ = 0;
    if (!tokenize_more() || !(docs_.front().at == document)) {
      throw std::runtime_error("parquet stream: no document at file " + std::to_string(document.file) + ", row group " +
                               std::to_string(document.row_group) + ", row " + std::to_string(document.row) +
                               " any more (were the files changed since the position was saved?)");
    }
    const int64_t length = (docs_.size() > 1 ? docs_[1].begin : static_cast<int64_t>(buffer_.size()));
    if (token < 0 || token >= length) {
      throw std::runtime_error("parquet stream: the document at the saved position has " + std::to_string(length) +
                               " tokens, the position points at token " + std::to_string(token) +
                               " (was the tokenizer or the file changed?)");
    }
    cursor_ = token;
  }
  void restart() { seek(train_start_, 0); }

  // Makes sure `count` tokens from the cursor are buffered; false when the stream ends first.
  bool fill(int64_t count) {
    while (static_cast<int64_t>(buffer_.size()) - cursor_ < count) {
      if (!tokenize_more()) return false;
    }
    return true;
  }
  int64_t buffered() const { return static_cast<int64_t>(buffer_.size()) - cursor_; }
  std::span<const int32_t> tokens() const {
    return std::span<const int32_t>(buffer_).subspan(static_cast<size_t>(cursor_));
  }

  // The document holding the token `offset` after the cursor (buffered), and its index in it.
  std::pair<DocumentLocation, int64_t> location(int64_t offset) const {
    const int64_t target = cursor_ + offset;
    const auto it =
        std::upper_bound(docs_.begin(), docs_.end(), target, [](int64_t t, const Doc& d) { return t < d.begin; });
    const Doc& d = *std::prev(it);
    return {d.at, target - d.begin};
  }

  void advance(int64_t count) {
    cursor_ += count;
    while (docs_.size() > 1 && docs_[1].begin <= cursor_) docs_.pop_front();
    const int64_t drop = docs_.empty() ? 0 : docs_.front().begin;
    if (drop > (1 << 20) && drop * 2 > static_cast<int64_t>(buffer_.size())) {
      buffer_.erase(buffer_.begin(), buffer_.begin() + drop);
      for (Doc& d : docs_) d.begin -= drop;
      cursor_ -= drop;
    }
  }

 private:
  struct Doc {
    DocumentLocation at;
    int64_t begin;  // buffer index of its EOS
  };
  // Reads about threads × 1 MB of documents, tokenizes them and appends them; false at the end.
  bool tokenize_more() {
    std::vector<std::string> docs;
    std::vector<DocumentLocation> where;
    std::string doc;
    DocumentLocation at;
    int64_t bytes = 0;
    while (bytes < kChunkBytesPerThread * threads_ && reader_.next(doc, at)) {
      bytes += static_cast<int64_t>(doc.size());
      docs.push_back(std::move(doc));
      where.push_back(at);
    }
    if (docs.empty()) return false;
    const auto encoded = tokenize(tok_, docs, threads_);
    for (size_t i = 0; i < docs.size(); ++i) {
      docs_.push_back({where[i], static_cast<int64_t>(buffer_.size())});
      buffer_.insert(buffer_.end(), encoded[i].begin(), encoded[i].end());
    }
    return true;
  }

  ParquetDocuments reader_;
  const Tokenizer& tok_;
  int threads_;
  DocumentLocation train_start_;
  std::vector<int32_t> buffer_;
  std::deque<Doc> docs_;
  int64_t cursor_ = 0;
};

// ---------------------------------------------------------------------------------------------

StreamingLoader::StreamingLoader(StreamingConfig config) : config_(std::move(config)) {
  const StreamingConfig& c = config_;
  require(!c.files.empty(), "data.path: the parquet stream has no files");
  require(c.tokenizer != nullptr, "data.tokenizer: a parquet stream needs a tokenizer");
  require(c.val_docs >= 0, "data.val_docs: expected a count ≥ 0");
  require(c.threads >= 1, "data.threads: expected at least 1");
  micro_steps_ = check_loader_config(c.loader);
  for (const auto& f : c.files) {
    const std::string entry = f.filename().string() + '\0' + std::to_string(std::filesystem::file_size(f)) + '\0';
    files_crc_ = static_cast<uint32_t>(
        ::crc32(files_crc_, reinterpret_cast<const Bytef*>(entry.data()), static_cast<uInt>(entry.size())));
  }

  // The val split: the first val_docs documents; the train stream starts at the next one.
  ParquetDocuments reader(c.files, c.parquet);
  std::vector<std::string> val_docs;
  std::string doc;
  DocumentLocation at;
  bool more = true;
  while (static_cast<int64_t>(val_docs.size()) < c.val_docs && (more = reader.next(doc, at))) {
    val_docs.push_back(std::move(doc));
  }
  if (!more || !reader.next(doc, at)) {
    throw std::invalid_argument("data.val_docs = " + std::to_string(c.val_docs) + ": the parquet stream has " +
                                std::to_string(val_docs.size()) + " documents, none left for training");
  }
  train_start_ = at;
  std::vector<int32_t> val_tokens;
  for (const auto& d : tokenize(*c.tokenizer, val_docs, c.threads))
    val_tokens.insert(val_tokens.end(), d.begin(), d.end());
  val_ = std::make_shared<const TokenStream>(std::move(val_tokens));

  consumer_ = {0, 0, 0, train_start_, 0};
  start(consumer_);
}

StreamingLoader::~StreamingLoader() { stop(); }

void StreamingLoader::start(const StreamPosition& from) {
  auto producer = std::make_shared<Producer>(config_, train_start_);
  const uint64_t generation = generation_;
  thread_ = std::thread([this, producer, generation, from] {
    try {
      producer->seek(from.document, from.token);
      StreamPosition p = from;
      const LoaderConfig& l = config_.loader;
      const int64_t step_tokens = l.global_batch_seqs * l.seq_len;
      bool restarted = false;
      for (;;) {
        if (!producer->fill(step_tokens + 1)) {
          if (restarted || (p.epoch == 0 && p.step == 0)) {
            throw std::invalid_argument(
                "parquet stream: the train documents hold " + std::to_string(producer->buffered()) +
                " tokens: fewer than one global batch of " + std::to_string(l.global_batch_seqs) + " sequences of " +
                std::to_string(l.seq_len) + " + 1 tokens");
          }
          producer->restart();
          p = {p.epoch + 1, 0, 0, train_start_, 0};
          restarted = true;
          continue;
        }
        restarted = false;
        const auto [next_document, next_token] = producer->location(step_tokens);
        for (int64_t m = p.micro_step; m < micro_steps_; ++m) {
          std::vector<int64_t> starts(static_cast<size_t>(l.micro_batch_seqs));
          const int64_t first = l.rank * (l.global_batch_seqs / l.world) + m * l.micro_batch_seqs;
          for (int64_t b = 0; b < l.micro_batch_seqs; ++b) starts[static_cast<size_t>(b)] = (first + b) * l.seq_len;
          Ready r;
          pack_windows(producer->tokens(), starts, l.seq_len, l.document_masking ? eos_id() : -1, r.batch);
          r.next = m + 1 < micro_steps_ ? StreamPosition{p.epoch, p.step, m + 1, p.document, p.token}
                                        : StreamPosition{p.epoch, p.step + 1, 0, next_document, next_token};
          std::unique_lock lock(mutex_);
          changed_.wait(lock, [&] { return stop_ || static_cast<int>(ready_.size()) < l.prefetch; });
          if (stop_ || generation != generation_) return;
          ready_.push_back(std::move(r));
          changed_.notify_all();
        }
        producer->advance(step_tokens);
        p = {p.epoch, p.step + 1, 0, next_document, next_token};
      }
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (generation == generation_) error_ = std::current_exception();
      changed_.notify_all();
    }
  });
}

void StreamingLoader::stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  stop_ = false;
  ready_.clear();
  error_ = nullptr;
  ++generation_;
}

TokenBatch StreamingLoader::next() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !ready_.empty() || error_; });
  if (ready_.empty()) std::rethrow_exception(error_);
  Ready r = std::move(ready_.front());
  ready_.pop_front();
  consumer_ = r.next;
  changed_.notify_all();
  return std::move(r.batch);
}

StreamPosition StreamingLoader::stream_position() const {
  std::lock_guard lock(mutex_);
  return consumer_;
}

nlohmann::json StreamingLoader::identity() const {
  char crc[16];
  std::snprintf(crc, sizeof crc, "0x%08x", files_crc_);
  return {{"files", config_.files.size()},
          {"files_crc32", crc},
          {"text_field", config_.parquet.text_column},
          {"where", config_.parquet.filter.text()},
          {"tokenizer", config_.tokenizer->kind()},
          {"vocab_size", config_.tokenizer->vocab_size()},
          {"eos_id", config_.tokenizer->eos_id()},
          {"val_docs", config_.val_docs},
          {"seq_len", config_.loader.seq_len},
          {"global_batch_seqs", config_.loader.global_batch_seqs}};
}

nlohmann::json StreamingLoader::position() const {
  const StreamPosition p = stream_position();
  const auto file = static_cast<size_t>(p.document.file);
  return {{"kind", kKind},
          {"epoch", p.epoch},
          {"step", p.step},
          {"micro_step", p.micro_step},
          {"file", p.document.file},
          {"file_name", file < config_.files.size() ? config_.files[file].filename().string() : ""},
          {"row_group", p.document.row_group},
          {"row", p.document.row},
          {"token", p.token},
          {"stream", identity()}};
}

StreamPosition StreamingLoader::parse(const nlohmann::json& j, const std::string& source) const {
  const auto fail = [&](const std::string& what) {
    throw std::invalid_argument("data position in " + source + ": " + what);
  };
  if (!j.is_object() || j.value("kind", "") != kKind) {
    fail(
        "not a parquet stream's position (the run was started on other data; data.path = \"parquet:...\" "
        "resumes only a parquet stream)");
  }
  const auto integer = [&](const char* name) {
    if (!j.contains(name) || !j[name].is_number_integer() || j[name].get<int64_t>() < 0) {
      fail(std::string("field '") + name + "': expected a non-negative integer");
    }
    return j[name].get<int64_t>();
  };
  StreamPosition p{integer("epoch"),
                   integer("step"),
                   integer("micro_step"),
                   {integer("file"), integer("row_group"), integer("row")},
                   integer("token")};
  const nlohmann::json here = identity();
  const nlohmann::json& saved = j.contains("stream") ? j["stream"] : nlohmann::json::object();
  for (const auto& [key, value] : here.items()) {
    if (!saved.contains(key) || saved[key] != value) {
      fail("'" + key + "' was " + (saved.contains(key) ? saved[key].dump() : "absent") + " and is " + value.dump() +
           " now: the position belongs to another stream (files, filter, tokenizer or batch shape changed)");
    }
  }
  if (p.micro_step >= micro_steps_) {
    fail("micro_step " + std::to_string(p.micro_step) + " ≥ micro-steps per step " + std::to_string(micro_steps_) +
         " (resume on a different layout only at a step boundary)");
  }
  if (p.document.file >= static_cast<int64_t>(config_.files.size())) fail("file index out of range");
  return p;
}

void StreamingLoader::check_position(const nlohmann::json& position, const std::string& source) const {
  parse(position, source);
}

void StreamingLoader::seek(const nlohmann::json& position, const std::string& source) {
  const StreamPosition p = parse(position, source);
  stop();
  {
    std::lock_guard lock(mutex_);
    consumer_ = p;
  }
  start(p);
}

std::string StreamingLoader::describe() const {
  int64_t bytes = 0;
  for (const auto& f : config_.files) bytes += static_cast<int64_t>(std::filesystem::file_size(f));
  char text[160];
  std::snprintf(text, sizeof text, "a parquet stream of %zu files (%.1f MB), %lld val documents", config_.files.size(),
                static_cast<double>(bytes) / 1e6, static_cast<long long>(config_.val_docs));
  return text + (config_.parquet.filter.empty() ? std::string() : ", where " + config_.parquet.filter.text());
}

}  // namespace linea::data

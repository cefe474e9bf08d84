#include "data/loader.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "data/index_permutation.h"

namespace linea::data {

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

uint64_t epoch_key(uint64_t seed, int64_t epoch) { return mix64(mix64(seed) + static_cast<uint64_t>(epoch)); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// LoaderPosition

nlohmann::json LoaderPosition::to_json() const {
  return {{"epoch", epoch},
          {"step", step},
          {"micro_step", micro_step},
          {"seed", seed},
          {"seq_len", seq_len},
          {"global_batch_seqs", global_batch_seqs},
          {"train_tokens", train_tokens}};
}

LoaderPosition LoaderPosition::from_json(const nlohmann::json& j, const std::string& source) {
  const auto field = [&](const char* name) -> const nlohmann::json& {
    const nlohmann::json* v = j.is_object() && j.contains(name) ? &j.at(name) : nullptr;
    if (!v || !v->is_number_integer() || (!v->is_number_unsigned() && v->get<int64_t>() < 0)) {
      throw std::runtime_error("loader position in " + source + ": field '" + name +
                               "': expected a non-negative integer");
    }
    return *v;
  };
  LoaderPosition p;
  p.epoch = field("epoch").get<int64_t>();
  p.step = field("step").get<int64_t>();
  p.micro_step = field("micro_step").get<int64_t>();
  p.seed = field("seed").get<uint64_t>();
  p.seq_len = field("seq_len").get<int64_t>();
  p.global_batch_seqs = field("global_batch_seqs").get<int64_t>();
  p.train_tokens = field("train_tokens").get<int64_t>();
  return p;
}

// ---------------------------------------------------------------------------------------------
// Loader

int64_t check_loader_config(const LoaderConfig& c) {
  require(c.seq_len >= 1, "loader: seq_len must be ≥ 1, got " + std::to_string(c.seq_len));
  require(c.world >= 1 && c.rank >= 0 && c.rank < c.world,
          "loader: rank " + std::to_string(c.rank) + " of world " + std::to_string(c.world) + " is not valid");
  require(c.micro_batch_seqs >= 1, "loader: micro_batch_seqs must be ≥ 1");
  require(c.global_batch_seqs >= 1 && c.global_batch_seqs % (c.world * c.micro_batch_seqs) == 0,
          "loader: global_batch_seqs " + std::to_string(c.global_batch_seqs) +
              " must be a positive multiple of world × micro_batch_seqs = " + std::to_string(c.world) + " × " +
              std::to_string(c.micro_batch_seqs));
  require(c.prefetch >= 1, "loader: prefetch must be ≥ 1");
  return c.global_batch_seqs / (c.world * c.micro_batch_seqs);
}

Loader::Loader(std::shared_ptr<const Dataset> data, const LoaderConfig& config)
    : data_(std::move(data)), config_(config) {
  const LoaderConfig& c = config_;
  micro_steps_ = check_loader_config(c);
  const int64_t n = data_->split(Split::train).num_tokens();
  windows_ = (n - 1) / c.seq_len;
  require(windows_ >= c.global_batch_seqs,
          "loader: the train split of " + data_->dir().string() + " has " + std::to_string(n) + " tokens, " +
              std::to_string(windows_) + " sequences of " + std::to_string(c.seq_len) +
              " + 1 tokens: fewer than one global batch of " + std::to_string(c.global_batch_seqs));
  consumer_.seed = c.seed;
  consumer_.seq_len = c.seq_len;
  consumer_.global_batch_seqs = c.global_batch_seqs;
  consumer_.train_tokens = n;
  producer_ = consumer_;
  thread_ = std::thread([this] { prefetch_loop(); });
}

Loader::~Loader() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

LoaderPosition Loader::advance(LoaderPosition p) const {
  if (++p.micro_step == micro_steps_) {
    p.micro_step = 0;
    if (++p.step == steps_per_epoch()) {
      p.step = 0;
      ++p.epoch;
    }
  }
  return p;
}

TokenBatch Loader::build(const LoaderPosition& p) const {
  const LoaderConfig& c = config_;
  const IndexPermutation order(static_cast<uint64_t>(windows_), epoch_key(c.seed, p.epoch));
  const int64_t first_slot =
      p.step * c.global_batch_seqs + c.rank * (c.global_batch_seqs / c.world) + p.micro_step * c.micro_batch_seqs;
  std::vector<int64_t> starts(static_cast<size_t>(c.micro_batch_seqs));
  for (int64_t b = 0; b < c.micro_batch_seqs; ++b) {
    starts[b] = static_cast<int64_t>(order(static_cast<uint64_t>(first_slot + b))) * c.seq_len;
  }
  TokenBatch batch;
  pack_windows(data_->split(Split::train), starts, c.seq_len, c.document_masking ? data_->eos_id() : -1, batch);
  return batch;
}

void Loader::prefetch_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || (!error_ && static_cast<int>(ready_.size()) < config_.prefetch); });
    if (stop_) return;
    const LoaderPosition p = producer_;
    const uint64_t generation = generation_;
    lock.unlock();
    TokenBatch batch;
    std::exception_ptr error;
    try {
      batch = build(p);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (generation != generation_) continue;  // seek() happened meanwhile
    if (error) {
      error_ = error;
    } else {
      ready_.push_back(std::move(batch));
      producer_ = advance(p);
    }
    changed_.notify_all();
  }
}

TokenBatch Loader::next() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !ready_.empty() || error_; });
  if (ready_.empty()) std::rethrow_exception(error_);  // batches ready before the error still come first
  TokenBatch batch = std::move(ready_.front());
  ready_.pop_front();
  consumer_ = advance(consumer_);
  changed_.notify_all();
  return batch;
}

LoaderPosition Loader::loader_position() const {
  std::lock_guard lock(mutex_);
  return consumer_;
}

void Loader::check_position(const nlohmann::json& position, const std::string& source) const {
  check(LoaderPosition::from_json(position, source));
}

std::string Loader::describe() const {
  const double tokens = static_cast<double>(data_->split(Split::train).num_tokens());
  char text[64];
  std::snprintf(text, sizeof text, "%.2fM train tokens", tokens / 1e6);
  return data_->dir().string() + " (" + text + ")";
}

void Loader::check(const LoaderPosition& p) const {
  const auto mismatch = [&](const char* field, auto saved, auto now) {
    if (saved != now) {
      throw std::invalid_argument("loader position: " + std::string(field) + " is " + std::to_string(saved) +
                                  " in the saved position but " + std::to_string(now) +
                                  " here; it cannot be resumed on this data and configuration");
    }
  };
  mismatch("seed", p.seed, config_.seed);
  mismatch("seq_len", p.seq_len, config_.seq_len);
  mismatch("global_batch_seqs", p.global_batch_seqs, config_.global_batch_seqs);
  mismatch("train_tokens", p.train_tokens, data_->split(Split::train).num_tokens());
  require(p.step < steps_per_epoch(), "loader position: step " + std::to_string(p.step) + " ≥ steps per epoch " +
                                          std::to_string(steps_per_epoch()));
  require(p.micro_step < micro_steps_, "loader position: micro_step " + std::to_string(p.micro_step) +
                                           " ≥ micro-steps per step " + std::to_string(micro_steps_) +
                                           " (resume on a different layout only at a step boundary)");
}

void Loader::seek_to(const LoaderPosition& p) {
  check(p);
  {
    std::lock_guard lock(mutex_);
    ready_.clear();
    error_ = nullptr;
    consumer_ = producer_ = p;
    ++generation_;
  }
  changed_.notify_all();
}

// ---------------------------------------------------------------------------------------------
// ValidationIterator

ValidationIterator::ValidationIterator(std::shared_ptr<const Dataset> data, int64_t seq_len, int64_t global_batch_seqs,
                                       int rank, int world, int64_t max_steps, bool document_masking,
                                       int64_t micro_batch_seqs)
    : ValidationIterator(std::shared_ptr<const TokenStream>(data, &data->split(Split::val)), data->eos_id(),
                         data->dir().string(), seq_len, global_batch_seqs, rank, world, max_steps, document_masking,
                         micro_batch_seqs) {}

ValidationIterator::ValidationIterator(std::shared_ptr<const TokenStream> val, int32_t eos_id, const std::string& name,
                                       int64_t seq_len, int64_t global_batch_seqs, int rank, int world,
                                       int64_t max_steps, bool document_masking, int64_t micro_batch_seqs)
    : val_(std::move(val)),
      eos_id_(eos_id),
      seq_len_(seq_len),
      global_batch_seqs_(global_batch_seqs),
      rank_(rank),
      document_masking_(document_masking) {
  require(seq_len >= 1, "validation: seq_len must be ≥ 1");
  require(world >= 1 && rank >= 0 && rank < world,
          "validation: rank " + std::to_string(rank) + " of world " + std::to_string(world) + " is not valid");
  require(global_batch_seqs >= 1 && global_batch_seqs % world == 0,
          "validation: global_batch_seqs " + std::to_string(global_batch_seqs) +
              " must be a positive multiple of world " + std::to_string(world));
  rank_seqs_ = global_batch_seqs / world;
  micro_seqs_ = micro_batch_seqs > 0 ? micro_batch_seqs : rank_seqs_;
  require(rank_seqs_ % micro_seqs_ == 0, "validation: each rank's " + std::to_string(rank_seqs_) +
                                             " sequences per step must be a multiple of micro_batch_seqs " +
                                             std::to_string(micro_seqs_));
  const int64_t n = val_->num_tokens();
  const int64_t windows = n > 0 ? (n - 1) / seq_len : 0;
  num_steps_ = windows / global_batch_seqs;
  if (max_steps > 0) num_steps_ = std::min(num_steps_, max_steps);
  require(num_steps_ > 0, "validation: the val split of " + name + " has " + std::to_string(n) +
                              " tokens: fewer than one global batch of " + std::to_string(global_batch_seqs) +
                              " sequences of " + std::to_string(seq_len) + " + 1 tokens");
}

bool ValidationIterator::next(TokenBatch& batch) {
  if (step_ == num_steps_) return false;
  std::vector<int64_t> starts(static_cast<size_t>(micro_seqs_));
  const int64_t first = step_ * global_batch_seqs_ + rank_ * rank_seqs_ + micro_step_ * micro_seqs_;
  for (int64_t b = 0; b < micro_seqs_; ++b) starts[b] = (first + b) * seq_len_;
  pack_windows(*val_, starts, seq_len_, document_masking_ ? eos_id_ : -1, batch);
  if (++micro_step_ * micro_seqs_ == rank_seqs_) {
    micro_step_ = 0;
    ++step_;
  }
  return true;
}

}  // namespace linea::data

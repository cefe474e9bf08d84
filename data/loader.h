// Loader: this rank's training micro-batches, prepared ahead by a background thread (double
// buffered), in a global order fixed by (seed, epoch) alone.
//
// Global order. The train split is one token stream of N tokens; window w is tokens
// [w·T, w·T + T + 1) (T inputs and their T targets), for w < W = ⌊(N − 1) / T⌋. Epoch e visits the
// windows in the order of IndexPermutation(W, key(seed, e)): global slot s of the epoch holds
// window perm(s). Global step g of an epoch is slots [g·G, (g + 1)·G) for G = global_batch_seqs;
// an epoch has ⌊W / G⌋ steps (the slots left over are skipped; other epochs order them
// differently). Rank r of R takes the contiguous share [r·G/R, (r + 1)·G/R) of each global batch,
// in micro-batches of B = micro_batch_seqs sequences (G/(R·B) micro-steps per step). So the
// concatenation over ranks and micro-steps of one global step is the same G sequences for any R
// and B, and a LoaderPosition restores the exact stream after a resume.
//
// ValidationIterator: the val split's windows in order (no shuffle), G per step, rank r taking its
// contiguous share, in micro-batches of B sequences (as training: the same activation memory); the
// same windows for every run.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <thread>

#include "data/dataset.h"
#include "data/token_batch.h"
#include "data/training_batches.h"
#include "data/validation_batches.h"

namespace linea::data {

struct LoaderConfig {
  int64_t seq_len = 0;            // T
  int64_t global_batch_seqs = 0;  // G: sequences per optimizer step over all ranks
  int64_t micro_batch_seqs = 0;   // B: sequences per micro-batch on one rank
  int rank = 0, world = 1;
  uint64_t seed = 0;
  int prefetch = 2;  // batches prepared ahead
  // true: a sequence also starts at every EOS (documents never see each other); false: each row is
  // one sequence, EOS an ordinary token (long-context benchmarks over short documents).
  bool document_masking = true;
};

// Checks a configuration on its own (every shape positive, G a multiple of R·B, ...) and returns
// the micro-steps per step G / (R·B); throws std::invalid_argument naming the field.
int64_t check_loader_config(const LoaderConfig& config);

// Where a Loader stands: the next micro-batch it returns. Serialized into checkpoints; the last
// four fields say which stream it belongs to and are checked when it is restored.
struct LoaderPosition {
  int64_t epoch = 0;
  int64_t step = 0;        // global step within the epoch
  int64_t micro_step = 0;  // this rank's micro-batch within the step
  uint64_t seed = 0;
  int64_t seq_len = 0;
  int64_t global_batch_seqs = 0;
  int64_t train_tokens = 0;

  nlohmann::json to_json() const;
  // Throws std::runtime_error naming `source` and the field on a malformed object.
  static LoaderPosition from_json(const nlohmann::json& j, const std::string& source);
  bool operator==(const LoaderPosition&) const = default;
};

class Loader : public TrainingBatches {
 public:
  // Throws std::invalid_argument naming the field when the configuration does not fit the data
  // (G not divisible by R·B, fewer windows than one global batch, ...).
  Loader(std::shared_ptr<const Dataset> data, const LoaderConfig& config);
  ~Loader() override;
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next micro-batch; blocks until it is ready. Rethrows an error met while preparing it.
  TokenBatch next() override;
  LoaderPosition loader_position() const;
  // Continues from `p` (from loader_position() of a loader over the same data, seed, T and G; R
  // and B may differ when p.micro_step is 0). Throws std::invalid_argument naming the mismatch.
  void seek_to(const LoaderPosition& p);

  // TrainingBatches: the position as LoaderPosition's JSON.
  nlohmann::json position() const override { return loader_position().to_json(); }
  void check_position(const nlohmann::json& position, const std::string& source) const override;
  void seek(const nlohmann::json& position, const std::string& source) override {
    seek_to(LoaderPosition::from_json(position, source));
  }
  std::string describe() const override;

  int64_t windows_per_epoch() const { return windows_; }
  int64_t steps_per_epoch() const { return windows_ / config_.global_batch_seqs; }
  int64_t micro_steps_per_step() const override { return micro_steps_; }

 private:
  TokenBatch build(const LoaderPosition& p) const;
  LoaderPosition advance(LoaderPosition p) const;
  void check(const LoaderPosition& p) const;
  void prefetch_loop();

  std::shared_ptr<const Dataset> data_;
  LoaderConfig config_;
  int64_t windows_ = 0, micro_steps_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<TokenBatch> ready_;
  LoaderPosition consumer_, producer_;
  uint64_t generation_ = 0;  // bumped by seek(): batches of an older generation are dropped
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

class ValidationIterator : public ValidationBatches {
 public:
  // max_steps = 0: every full global batch of the val split; micro_batch_seqs = 0: the rank's whole
  // share at once. Throws std::invalid_argument when the val split holds fewer than G windows, G is
  // not divisible by world, or the share G / world by micro_batch_seqs.
  ValidationIterator(std::shared_ptr<const Dataset> data, int64_t seq_len, int64_t global_batch_seqs, int rank,
                     int world, int64_t max_steps = 0, bool document_masking = true, int64_t micro_batch_seqs = 0);
  // Over any val token stream (a streaming run's, held in memory); `name` says where it comes from.
  ValidationIterator(std::shared_ptr<const TokenStream> val, int32_t eos_id, const std::string& name, int64_t seq_len,
                     int64_t global_batch_seqs, int rank, int world, int64_t max_steps = 0,
                     bool document_masking = true, int64_t micro_batch_seqs = 0);
  int64_t num_steps() const override { return num_steps_; }
  // The next micro-batch of this rank's share of the global batches; false after the last one.
  bool next(TokenBatch& batch) override;
  void reset() override { step_ = micro_step_ = 0; }

 private:
  std::shared_ptr<const TokenStream> val_;
  int32_t eos_id_;
  int64_t seq_len_, global_batch_seqs_, rank_seqs_, micro_seqs_, rank_;
  bool document_masking_;
  int64_t num_steps_ = 0, step_ = 0, micro_step_ = 0;
};

}  // namespace linea::data

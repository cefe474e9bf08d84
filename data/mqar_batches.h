// MqarBatches: training micro-batches of MQAR sequences (mqar.h), for data.path = "mqar:...".
// The global order is fixed by the seed alone, as the shard loader's: global step g holds the
// sequences g·G … g·G + G − 1 (G = global_batch_seqs, sequence i = mqar_sequence(config, seed, i)),
// rank r of R takes [r·G/R, (r + 1)·G/R) of them in micro-batches of B, so the tokens of a step are
// the same for any R and B. Every row is one sequence; only the query positions have targets (the
// loss is MQAR's). The position a checkpoint saves is the next (step, micro_step); it is checked
// against the MQAR configuration, seed, T and G when a run resumes.
// MqarValidation: the val split, `steps` global batches of sequences drawn from a separate seed
// stream (seed ⊕ a constant), the same for every run with the same configuration and seed.
#pragma once
#include <cstdint>
#include <string>

#include "data/loader.h"
#include "data/mqar.h"
#include "data/training_batches.h"
#include "data/validation_batches.h"

namespace linea::data {

// One micro-batch: sequences first … first + count − 1 of the stream with this seed.
TokenBatch mqar_batch(const MqarConfig& config, uint64_t seed, int64_t first, int64_t count);

class MqarBatches : public TrainingBatches {
 public:
  // config.seq_len is the batches' T; loader.seq_len must equal it.
  MqarBatches(const MqarConfig& config, const LoaderConfig& loader);
  TokenBatch next() override;
  int64_t micro_steps_per_step() const override { return micro_steps_; }
  nlohmann::json position() const override;
  void check_position(const nlohmann::json& position, const std::string& source) const override;
  void seek(const nlohmann::json& position, const std::string& source) override;
  std::string describe() const override;

 private:
  MqarConfig config_;
  LoaderConfig loader_;
  int64_t micro_steps_ = 0;
  int64_t step_ = 0, micro_step_ = 0;
};

// The seed of the val split's sequences.
uint64_t mqar_validation_seed(uint64_t seed);

class MqarValidation : public ValidationBatches {
 public:
  // `steps` global batches of loader.global_batch_seqs sequences (steps ≥ 1).
  MqarValidation(const MqarConfig& config, const LoaderConfig& loader, int64_t steps);
  int64_t num_steps() const override { return steps_; }
  bool next(TokenBatch& batch) override;
  void reset() override { step_ = micro_step_ = 0; }

 private:
  MqarConfig config_;
  LoaderConfig loader_;
  int64_t steps_, micro_steps_, step_ = 0, micro_step_ = 0;
};

}  // namespace linea::data

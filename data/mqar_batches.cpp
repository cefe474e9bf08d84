#include "data/mqar_batches.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace linea::data {

TokenBatch mqar_batch(const MqarConfig& config, uint64_t seed, int64_t first, int64_t count) {
  TokenBatch batch;
  batch.batch_seqs = count;
  batch.seq_len = config.seq_len;
  for (int64_t i = 0; i < count; ++i) {
    const MqarSequence s = mqar_sequence(config, seed, uint64_t(first + i));
    batch.inputs.insert(batch.inputs.end(), s.inputs.begin(), s.inputs.end());
    batch.targets.insert(batch.targets.end(), s.targets.begin(), s.targets.end());
  }
  batch.layout = SeqLayout::uniform(count, config.seq_len);
  return batch;
}

MqarBatches::MqarBatches(const MqarConfig& config, const LoaderConfig& loader) : config_(config), loader_(loader) {
  check_mqar_config(config, "mqar");
  if (loader.seq_len != config.seq_len) {
    throw std::invalid_argument("mqar: seq_len = " + std::to_string(config.seq_len) +
                                " must equal train.seq_len = " + std::to_string(loader.seq_len));
  }
  micro_steps_ = check_loader_config(loader);
}

namespace {

// The first sequence of micro-step m of global step g on this rank.
int64_t first_sequence(const LoaderConfig& loader, int64_t step, int64_t micro_step) {
  const int64_t share = loader.global_batch_seqs / loader.world;
  return step * loader.global_batch_seqs + loader.rank * share + micro_step * loader.micro_batch_seqs;
}

}  // namespace

TokenBatch MqarBatches::next() {
  TokenBatch batch =
      mqar_batch(config_, loader_.seed, first_sequence(loader_, step_, micro_step_), loader_.micro_batch_seqs);
  if (++micro_step_ == micro_steps_) {
    micro_step_ = 0;
    ++step_;
  }
  return batch;
}

nlohmann::json MqarBatches::position() const {
  return {{"kind", "mqar"},
          {"step", step_},
          {"micro_step", micro_step_},
          {"seed", loader_.seed},
          {"seq_len", config_.seq_len},
          {"global_batch_seqs", loader_.global_batch_seqs},
          {"vocab", config_.vocab},
          {"pairs", config_.pairs},
          {"power_a", config_.power_a}};
}

void MqarBatches::check_position(const nlohmann::json& p, const std::string& source) const {
  const nlohmann::json expected = position();
  if (!p.is_object() || p.value("kind", "") != "mqar") {
    throw std::invalid_argument(source + ": data position: expected an MQAR position (kind \"mqar\"), got " + p.dump());
  }
  for (const char* key : {"seed", "seq_len", "global_batch_seqs", "vocab", "pairs", "power_a"}) {
    if (!p.contains(key) || p[key] != expected[key]) {
      throw std::invalid_argument(source + ": data position: " + key + " " +
                                  (p.contains(key) ? p[key].dump() : "missing") + " differs from this run's " +
                                  expected[key].dump());
    }
  }
  for (const char* key : {"step", "micro_step"}) {
    if (!p.contains(key) || !p[key].is_number_integer() || p[key].get<int64_t>() < 0) {
      throw std::invalid_argument(source + ": data position: " + key + ": expected a count >= 0");
    }
  }
  if (p["micro_step"].get<int64_t>() >= micro_steps_) {
    throw std::invalid_argument(source + ": data position: micro_step " + p["micro_step"].dump() +
                                " is not below this layout's " + std::to_string(micro_steps_) +
                                " micro-steps per step");
  }
}

void MqarBatches::seek(const nlohmann::json& p, const std::string& source) {
  check_position(p, source);
  step_ = p["step"].get<int64_t>();
  micro_step_ = p["micro_step"].get<int64_t>();
}

std::string MqarBatches::describe() const {
  return "MQAR (vocab " + std::to_string(config_.vocab) + ", " + std::to_string(config_.pairs) + " pairs in " +
         std::to_string(config_.seq_len) + " tokens)";
}

uint64_t mqar_validation_seed(uint64_t seed) { return seed ^ 0x7A1D5EEDC0FFEEULL; }

MqarValidation::MqarValidation(const MqarConfig& config, const LoaderConfig& loader, int64_t steps)
    : config_(config),
      loader_(loader),
      steps_(std::max<int64_t>(1, steps)),
      micro_steps_(check_loader_config(loader)) {}

bool MqarValidation::next(TokenBatch& batch) {
  if (step_ == steps_) return false;
  batch = mqar_batch(config_, mqar_validation_seed(loader_.seed), first_sequence(loader_, step_, micro_step_),
                     loader_.micro_batch_seqs);
  if (++micro_step_ == micro_steps_) {
    micro_step_ = 0;
    ++step_;
  }
  return true;
}

}  // namespace linea::data

// TrainingBatches: what the trainer draws its micro-batches from, whatever the data is: a shard
// directory (Loader, loader.h) or parquet files tokenized as they stream in (StreamingLoader,
// streaming_loader.h). Its position is what a checkpoint saves: JSON that the same kind of source,
// over the same data and configuration, continues from with exactly the next batch.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "data/token_batch.h"

namespace linea::data {

class TrainingBatches {
 public:
  virtual ~TrainingBatches() = default;
  // The next micro-batch; blocks until it is ready; rethrows an error met while preparing it.
  virtual TokenBatch next() = 0;
  virtual int64_t micro_steps_per_step() const = 0;
  // Where it stands: the next micro-batch.
  virtual nlohmann::json position() const = 0;
  // Throws std::invalid_argument naming `source` and the field when `position` was not saved by
  // this kind of source over the same data and configuration.
  virtual void check_position(const nlohmann::json& position, const std::string& source) const = 0;
  // Continues from a position that check_position() accepts.
  virtual void seek(const nlohmann::json& position, const std::string& source) = 0;
  // What it reads, for the run's log line ("11.4M train tokens", "a parquet stream of 3 files").
  virtual std::string describe() const = 0;
};

}  // namespace linea::data

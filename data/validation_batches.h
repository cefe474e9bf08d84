// ValidationBatches: what the trainer's evaluation walks through: this rank's micro-batches of the
// val split, the same ones at every evaluation (reset() starts over). The shard and stream val
// splits (ValidationIterator, loader.h) and MQAR's (MqarValidation, mqar_batches.h) are ones.
#pragma once
#include <cstdint>

#include "data/token_batch.h"

namespace linea::data {

class ValidationBatches {
 public:
  virtual ~ValidationBatches() = default;
  virtual int64_t num_steps() const = 0;
  // The next micro-batch; false after the last one.
  virtual bool next(TokenBatch& batch) = 0;
  virtual void reset() = 0;
};

}  // namespace linea::data

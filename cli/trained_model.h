// A model trained by `linea train`, read back for inference (`linea score`, `linea generate`).
// PATH is a run directory (the newest committed checkpoint under PATH/checkpoints/) or one
// committed checkpoint directory (PATH/checkpoints/step-N/); the checkpoint's manifest holds the
// resolved run config the model is built from, and its "model/<parameter>" tensors the weights.
// The tokenizer is the run's: data.tokenizer for a parquet stream, else the one the shard
// manifest of data.path names (the default corpus's for "default"); a --tokenizer SPEC (as
// `linea prepare --tokenizer`) replaces it. Errors name the path and what was expected.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "data/tokenizer.h"
#include "model/model.h"
#include "worker/run_config.h"

namespace linea::cli {

struct TrainedModel {
  RunConfig config;
  std::unique_ptr<Model> model;  // on the CPU, f32
  std::filesystem::path checkpoint;
  int64_t step = 0;
};

TrainedModel load_trained_model(const std::filesystem::path& path);

// The run's tokenizer, or that of `spec` when it is not empty; its vocabulary must fit the model's.
std::unique_ptr<data::Tokenizer> load_run_tokenizer(const RunConfig& config, const std::string& spec,
                                                    int64_t model_vocab);

}  // namespace linea::cli

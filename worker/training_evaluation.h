// TrainingEvaluation: the [eval] tasks of a run (EvalConfig, run_config.h) during training. Rank 0
// runs them every `every` steps and after the last step on the model it trains, on the device it
// trains on (CPU, or CUDA in the step's compute dtype: the compute weights the optimizer refreshed),
// through inference::ModelLanguageModel, in arenas of their own (Model::with_separate_arenas) so
// that the training step's arenas, the gradients and the optimizer state stay as they were; the
// whole model is needed (tensor parallelism 1: the trainer refuses [eval] under tp > 1). It logs
// the device and dtype, then a line per result; each result is appended to RUN_DIR/eval.jsonl as
// its TaskResult JSON with "step", "device" and "dtype", and its metrics go into that step's metrics.jsonl line as
// "eval/<task>[@<context length>]/<metric>" (and "…_stderr").
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>

#include "data/tokenizer.h"
#include "model/model.h"
#include "worker/run_config.h"

namespace linea {

class TrainingEvaluation {
 public:
  TrainingEvaluation(const EvalConfig& config, std::unique_ptr<data::Tokenizer> tokenizer,
                     const std::filesystem::path& run_dir);
  void run(Model& model, int64_t step, nlohmann::json& metrics_line, std::ostream& log);

 private:
  EvalConfig config_;
  std::unique_ptr<data::Tokenizer> tokenizer_;
  std::filesystem::path file_;
};

}  // namespace linea

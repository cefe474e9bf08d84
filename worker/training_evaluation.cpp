#include "worker/training_evaluation.h"

#include <fstream>
#include <stdexcept>
#include <vector>

#include "eval/evaluation.h"
#include "inference/model_language_model.h"

namespace linea {

TrainingEvaluation::TrainingEvaluation(const EvalConfig& config, std::unique_ptr<data::Tokenizer> tokenizer,
                                       const std::filesystem::path& run_dir)
    : config_(config), tokenizer_(std::move(tokenizer)), file_(run_dir / "eval.jsonl") {}

void TrainingEvaluation::run(Model& model, int64_t step, nlohmann::json& metrics_line, std::ostream& log) {
  eval::EvalSettings settings;
  for (const std::string& t : config_.tasks) settings.tasks += (settings.tasks.empty() ? "" : ",") + t;
  settings.limit = config_.limit;
  settings.data_dir = config_.data_dir;
  settings.context_lengths = config_.context_lengths;
  settings.seed = uint64_t(config_.seed);
  std::ofstream out(file_, std::ios::app);
  if (!out) throw std::runtime_error(file_.string() + ": cannot open for appending");
  log << "step " << step << ": [eval] " << settings.tasks << " on " << device_name(model.device()) << " in "
      << dtype_name(model.params().compute_dtype()) << "\n";
  std::vector<eval::TaskResult> results;
  model.with_separate_arenas([&] {
    inference::ModelLanguageModel lm(model);
    results = eval::run_evaluation(settings, lm, *tokenizer_, log);
  });
  for (const eval::TaskResult& r : results) {
    nlohmann::json line = r.to_json();
    line["step"] = step;
    line["device"] = device_name(model.device());
    line["dtype"] = dtype_name(model.params().compute_dtype());
    out << line.dump() << "\n";
    std::string prefix = "eval/" + r.task;
    if (r.context_length > 0) prefix.append("@").append(std::to_string(r.context_length));
    prefix += "/";
    for (const auto& [name, m] : r.metrics) {
      metrics_line[prefix + name] = m.value;
      metrics_line[prefix + name + "_stderr"] = m.stderr_;
    }
  }
  if (!out.flush()) throw std::runtime_error(file_.string() + ": write failed");
}

}  // namespace linea

// `linea eval CHECKPOINT|RUN_DIR --tasks LIST [--limit N] [--out FILE] [--data-dir DIR]`: the
// evaluation tasks (eval/evaluation.h) on a trained model (cli/trained_model.h) through
// inference::ModelLanguageModel, on the device of --device (cli/trained_model.h); one JSON line per
// result, with the step, checkpoint, device and dtype, into FILE (default RUN_DIR/eval.jsonl,
// appended), a readable line per result on stdout, and the device and dtype on stderr.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/command_line.h"
#include "cli/trained_model.h"
#include "eval/evaluation.h"
#include "inference/model_language_model.h"

namespace linea::cli {
namespace {

constexpr const char* kUsage =
    "usage: linea eval RUN_DIR|CHECKPOINT --tasks LIST [--limit N] [--out FILE] [--data-dir DIR]\n"
    "                  [--lengths L1,L2,...] [--seed S] [--tokenizer SPEC] [--batch-tokens N] [--device D]\n"
    "\n"
    "Runs evaluation tasks on the model of a run (its newest committed checkpoint) or of one checkpoint.\n"
    "LIST is comma-separated: arc_challenge, arc_easy, hellaswag, piqa, winogrande, openbookqa,\n"
    "lambada_openai (files DIR/<task>.jsonl, lm-eval-harness's layouts: README \"Evaluation\");\n"
    "niah_single_1..3, niah_multikey_1..3, niah_multivalue, niah_multiquery, vt, cwe, fwe, qa_synthetic,\n"
    "qa_1, qa_2 (DIR/squad.json, DIR/hotpotqa.json); mqar. A prefix selects every task it begins\n"
    "(niah_single, arc); `ruler` all RULER tasks (qa_synthetic for qa_1/qa_2 without their files).\n"
    "  --limit N          items per data set, samples per synthetic task (default: all; 100 samples)\n"
    "  --out FILE         JSON lines, appended (default RUN_DIR/eval.jsonl)\n"
    "  --data-dir DIR     where the data sets are (default data/eval)\n"
    "  --lengths L,...    context lengths of the RULER tasks (default 4096)\n"
    "  --seed S           of the synthetic tasks (default 42)\n"
    "  --tokenizer SPEC   instead of the run's\n"
    "  --batch-tokens N   tokens per forward pass when scoring (default 16384)\n";

std::vector<int64_t> parse_lengths(const std::string& text) {
  std::vector<int64_t> lengths;
  size_t start = 0;
  while (start < text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    start = comma + 1;
    size_t used = 0;
    int64_t n = 0;
    try {
      n = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || item.empty() || n < 64) {
      throw std::invalid_argument("--lengths: expected comma-separated token counts >= 64, got \"" + text + "\"");
    }
    lengths.push_back(n);
  }
  if (lengths.empty()) throw std::invalid_argument("--lengths: expected at least one length");
  return lengths;
}

// The run directory of a checkpoint path (RUN_DIR/checkpoints/step-N) or of RUN_DIR itself.
std::filesystem::path run_directory(const std::filesystem::path& path) {
  const std::filesystem::path p = std::filesystem::absolute(path).lexically_normal();
  const std::filesystem::path parent = (p.has_filename() ? p : p.parent_path()).parent_path();
  return parent.filename() == "checkpoints" ? parent.parent_path() : p;
}

int run_eval(int argc, char** argv) {
  CommandLine flags("eval", std::string(kUsage) + kDeviceUsage);
  flags.option({"tasks", "limit", "out", "data-dir", "lengths", "seed", "tokenizer", "batch-tokens", "device"});
  if (const auto done = flags.positional(1, 1).parse(argc, argv)) return *done;
  flags.require({"tasks"});
  eval::EvalSettings settings;
  settings.tasks = flags.string("tasks", "");
  settings.limit = flags.integer("limit", 0, 0, int64_t(1) << 40);
  settings.data_dir = flags.string("data-dir", settings.data_dir.string());
  if (flags.has("lengths")) settings.context_lengths = parse_lengths(flags.string("lengths", ""));
  settings.seed = uint64_t(flags.integer("seed", 42, 0, int64_t(1) << 62));
  const int64_t batch_tokens = flags.integer("batch-tokens", 16384, 1, int64_t(1) << 30);
  eval::select_tasks(settings.tasks, settings.data_dir);  // a bad list fails before the model loads

  const TrainedModel trained = load_trained_model(flags.positional()[0], device_flag(flags));
  std::fprintf(stderr, "linea eval: %s\n", describe_placement(trained).c_str());
  const auto tokenizer =
      load_run_tokenizer(trained.config, flags.string("tokenizer", ""), trained.model->config().vocab);
  inference::ModelLanguageModel lm(*trained.model, {.max_batch_tokens = batch_tokens, .max_batch_sequences = 32});
  const std::filesystem::path out = flags.has("out") ? std::filesystem::path(flags.string("out", ""))
                                                     : run_directory(flags.positional()[0]) / "eval.jsonl";
  std::ofstream file(out, std::ios::app);
  if (!file) throw std::runtime_error(out.string() + ": cannot open for appending (--out)");
  std::cout << "evaluating " << trained.checkpoint.string() << " (step " << trained.step << ")\n";
  for (const eval::TaskResult& r : eval::run_evaluation(settings, lm, *tokenizer, std::cout)) {
    nlohmann::json line = r.to_json();
    line["step"] = trained.step;
    line["checkpoint"] = trained.checkpoint.string();
    line["device"] = device_name(trained.placement.device);
    line["dtype"] = dtype_name(trained.placement.compute);
    file << line.dump() << "\n";
  }
  file.flush();
  if (!file) throw std::runtime_error(out.string() + ": write failed");
  std::cout << "results appended to " << out.string() << "\n";
  return 0;
}

const CommandRegistration registration({"eval", "run evaluation tasks (lm-eval, RULER, MQAR) on a trained model",
                                        run_eval});

}  // namespace
}  // namespace linea::cli

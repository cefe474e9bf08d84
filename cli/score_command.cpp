// `linea score RUN_DIR|CHECKPOINT [--input FILE.jsonl]`: the log-likelihood of continuations
// under a context (the primitive of multiple-choice evaluations), with the model of a run
// (cli/trained_model.h) through inference::ModelLanguageModel, in batches; on the device of --device
// (the device and dtype named on stderr).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/command_line.h"
#include "cli/inference_input.h"
#include "cli/trained_model.h"
#include "inference/model_language_model.h"

namespace linea::cli {
namespace {

constexpr const char* kUsage =
    "usage: linea score RUN_DIR|CHECKPOINT [--input FILE.jsonl] [--tokenizer SPEC] [--batch-tokens N]\n"
    "                   [--device D]\n"
    "\n"
    "Scores each line of FILE (default: stdin), a JSON object with either\n"
    "  {\"context\": TEXT, \"continuation\": TEXT}            (encoded with the run's tokenizer, the\n"
    "                                                      context after its document token), or\n"
    "  {\"context_ids\": [IDS], \"continuation_ids\": [IDS]}  (token ids),\n"
    "and prints one JSON line per input line, in order:\n"
    "  {\"log_likelihood\": Σ log p(continuation | context) (natural log), \"greedy\": whether every\n"
    "   continuation token was the argmax, \"tokens\": continuation tokens}.\n"
    "With an empty context the first continuation token is not scored (no position predicts it).\n"
    "RUN_DIR: the newest committed checkpoint under RUN_DIR/checkpoints; CHECKPOINT: one step-N/.\n"
    "  --tokenizer SPEC   instead of the run's (spm:MODEL, gpt2:DIR, hf:PATH/tokenizer.json, tiktoken:PATH)\n"
    "  --batch-tokens N   tokens per forward pass (default 16384)\n";

int run_score(int argc, char** argv) {
  CommandLine flags("score", std::string(kUsage) + kDeviceUsage);
  flags.option({"input", "tokenizer", "batch-tokens", "device"}).positional(1, 1);
  if (const auto done = flags.parse(argc, argv)) return *done;
  const std::string tokenizer_spec = flags.string("tokenizer", "");
  const int64_t batch_tokens = flags.integer("batch-tokens", 16384, 1, int64_t(1) << 30);
  const TrainedModel trained = load_trained_model(flags.positional()[0], device_flag(flags));
  std::fprintf(stderr, "linea score: %s\n", describe_placement(trained).c_str());
  RequestText text(trained, tokenizer_spec);
  std::vector<inference::ScoreRequest> requests;
  for (const InputLine& input : read_input_lines(flags.string("input", ""))) {
    const nlohmann::json line = nlohmann::json::parse(input.text, nullptr, false);
    if (!line.is_object()) throw std::invalid_argument(input.where + ": expected a JSON object");
    requests.push_back({text.tokens(line, "context", input, true), text.tokens(line, "continuation", input, false)});
  }
  inference::ModelLanguageModel lm(*trained.model, {.max_batch_tokens = batch_tokens, .max_batch_sequences = 32});
  const auto results = lm.score(requests);
  for (size_t i = 0; i < results.size(); ++i) {
    const nlohmann::json out = {{"log_likelihood", results[i].log_likelihood},
                                {"greedy", results[i].greedy},
                                {"tokens", requests[i].continuation.size()}};
    std::printf("%s\n", out.dump().c_str());
  }
  return 0;
}

const CommandRegistration registration({"score", "log-likelihood of continuations under a trained model", run_score});

}  // namespace
}  // namespace linea::cli

// `linea generate RUN_DIR|CHECKPOINT [--input FILE]`: continuations of prompts with the model of
// a run (cli/trained_model.h): prefill through the chunked forward, then token by token through
// the layers' recurrent states and KV caches (inference/decoder.h), greedy or sampled; on the device
// of --device (the device and dtype named on stderr).
#include <algorithm>
#include <cstdint>
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
    "usage: linea generate RUN_DIR|CHECKPOINT [--input FILE] [--max-tokens N] [--temperature T]\n"
    "                      [--top-k K] [--top-p P] [--seed S] [--stop TEXT] [--batch B] [--tokenizer SPEC]\n"
    "                      [--device D]\n"
    "\n"
    "Continues each prompt of FILE (default: stdin), one per line: a JSON object\n"
    "  {\"prompt\": TEXT} or {\"prompt_ids\": [IDS]}, optionally with \"max_tokens\": N and \"stop\": [TEXT...],\n"
    "or a line of plain text (the prompt itself; a text prompt follows the tokenizer's document\n"
    "token, as documents do in the shards). Prints one JSON line per prompt, in order:\n"
    "  {\"text\": the continuation, \"ids\": its token ids, \"tokens\": their count}\n"
    "(\"text\" only when a tokenizer is known), then on stderr the prefill and decode throughput\n"
    "(tokens/s) and the decoding state's peak size.\n"
    "  --max-tokens N     tokens to generate per prompt at most (default 64)\n"
    "  --temperature T    0: greedy (default); else sample from softmax(logits / T)\n"
    "  --top-k K          sample among the K most likely tokens (default 0: all)\n"
    "  --top-p P          ... and among the fewest most likely whose mass reaches P (default 1)\n"
    "  --seed S           prompt i samples from a generator seeded with (S, i) (default 0)\n"
    "  --stop TEXT        end a continuation once its text contains TEXT (kept in the output)\n"
    "  --batch B          prompts decoded together (default 8)\n"
    "  --tokenizer SPEC   instead of the run's (spm:MODEL, gpt2:DIR, hf:PATH/tokenizer.json, tiktoken:PATH)\n";

int run_generate(int argc, char** argv) {
  CommandLine flags("generate", std::string(kUsage) + kDeviceUsage);
  flags.option(
      {"input", "max-tokens", "temperature", "top-k", "top-p", "seed", "stop", "batch", "tokenizer", "device"});
  if (const auto done = flags.positional(1, 1).parse(argc, argv)) return *done;
  inference::SamplingOptions sampling;
  sampling.temperature = flags.number("temperature", 0, 0, 1e6);
  sampling.top_k = flags.integer("top-k", 0, 0, int64_t(1) << 31);
  sampling.top_p = flags.number("top-p", 1, 1e-9, 1);
  sampling.seed = static_cast<uint64_t>(flags.integer("seed", 0, 0, INT64_MAX));
  const int64_t max_tokens = flags.integer("max-tokens", 64, 0, int64_t(1) << 30);
  const int64_t batch = flags.integer("batch", 8, 1, 4096);
  const std::vector<std::string> default_stops =
      flags.has("stop") ? std::vector<std::string>{*flags.get("stop")} : std::vector<std::string>{};

  const TrainedModel trained = load_trained_model(flags.positional()[0], device_flag(flags));
  std::fprintf(stderr, "linea generate: %s\n", describe_placement(trained).c_str());
  RequestText text(trained, flags.string("tokenizer", ""));
  std::vector<inference::GenerateRequest> requests;
  std::vector<std::vector<std::string>> stops;  // stop strings per request
  for (const InputLine& input : read_input_lines(flags.string("input", ""))) {
    nlohmann::json line = nlohmann::json::parse(input.text, nullptr, false);
    if (!line.is_object()) line = {{"prompt", input.text}};  // a plain-text prompt
    inference::GenerateRequest r;
    r.prompt = text.tokens(line, "prompt", input, true);
    r.max_tokens = max_tokens;
    if (line.contains("max_tokens")) {
      if (!line["max_tokens"].is_number_integer() || line["max_tokens"].get<int64_t>() < 0) {
        throw std::invalid_argument(input.where + ": max_tokens must be an integer ≥ 0");
      }
      r.max_tokens = line["max_tokens"].get<int64_t>();
    }
    stops.push_back(default_stops);
    if (line.contains("stop")) {
      if (!line["stop"].is_array()) throw std::invalid_argument(input.where + ": stop must be an array of strings");
      for (const auto& s : line["stop"]) {
        if (!s.is_string()) throw std::invalid_argument(input.where + ": stop must be an array of strings");
        stops.back().push_back(s.get<std::string>());
      }
    }
    requests.push_back(std::move(r));
  }
  const bool any_stop = std::any_of(stops.begin(), stops.end(), [](const auto& s) { return !s.empty(); });
  const auto stop_test = [&](size_t request, const inference::TokenIds& generated) {
    if (stops[request].empty()) return false;
    const std::string decoded = text.tokenizer().decode(generated);
    for (const std::string& stop : stops[request]) {
      if (decoded.find(stop) != std::string::npos) return true;
    }
    return false;
  };
  inference::ModelLanguageModel lm(*trained.model, {.max_batch_tokens = 16384, .max_batch_sequences = batch});
  const auto outputs =
      lm.generate(requests, sampling, any_stop ? inference::ModelLanguageModel::StopTest(stop_test) : nullptr);
  // Texts when the run's tokenizer is known (prompts given as ids may come from a run without one).
  data::Tokenizer* tokenizer = nullptr;
  try {
    tokenizer = &text.tokenizer();
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "linea generate: ids only: %s\n", e.what());
  }
  for (const inference::TokenIds& ids : outputs) {
    nlohmann::json out = {{"ids", ids}, {"tokens", ids.size()}};
    if (tokenizer) out["text"] = tokenizer->decode(ids);
    std::printf("%s\n", out.dump().c_str());
  }
  const inference::GenerateStats& s = lm.stats();
  std::fprintf(stderr,
               "prefill: %lld tokens in %.3f s (%.1f tokens/s); decode: %lld tokens in %.3f s (%.1f tokens/s); "
               "decoding state peak %.3f MiB\n",
               static_cast<long long>(s.prefill_tokens), s.prefill_seconds,
               s.prefill_seconds > 0 ? double(s.prefill_tokens) / s.prefill_seconds : 0.0,
               static_cast<long long>(s.decode_tokens), s.decode_seconds,
               s.decode_seconds > 0 ? double(s.decode_tokens) / s.decode_seconds : 0.0,
               double(s.peak_state_bytes) / (1024.0 * 1024.0));
  return 0;
}

const CommandRegistration registration({"generate", "continue prompts with a trained model", run_generate});

}  // namespace
}  // namespace linea::cli

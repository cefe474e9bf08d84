// `linea params CONFIG.toml [--inference] [section.key=value ...]`: the parameter count of the
// [model] in a config, by group and by optimizer role, without allocating the model; with
// --inference also the decoding state per sequence (recurrent states, KV caches).
#include <cstdio>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/command_line.h"
#include "data/config_reader.h"
#include "model/decoding_memory.h"
#include "model/model_config.h"
#include "model/parameter_count.h"

namespace linea::cli {
namespace {

constexpr const char* kUsage =
    "usage: linea params CONFIG.toml [--inference] [section.key=value ...]\n"
    "\n"
    "Prints the parameter count of the model in CONFIG.toml ([model] table) by group and by optimizer\n"
    "role, after applying the overrides (e.g. model.layers=12 model.hybrid=3:1). Nothing is allocated.\n"
    "--inference adds the decoding state per sequence: per mixer, the fixed part (recurrent states,\n"
    "short-conv inputs) and the part per token seen (KV caches, window - 1 tokens with a sliding\n"
    "window), and the total at a few context lengths, in the bytes the decoders hold: recurrent\n"
    "states in f32, inputs and KV caches in the run's dtype (bf16 on the GPU, f32 on the CPU).\n";

int run_params(int argc, char** argv) {
  CommandLine flags("params", kUsage);
  if (const auto done = flags.flag("inference").positional(1, CommandLine::kAny).parse(argc, argv)) return *done;
  const bool inference = flags.has("inference");
  const std::vector<std::string>& words = flags.positional();  // CONFIG, then the overrides
  ConfigReader reader = ConfigReader::from_file(words[0], {words.begin() + 1, words.end()});
  const ModelConfig config = ModelConfig::parse(reader.section("model"));
  reader.check_unknown_keys({"model"});
  std::fputs(format_parameter_count(config, count_parameters(config)).c_str(), stdout);
  if (inference) std::printf("\n%s", format_decoding_memory(decoding_memory(config)).c_str());
  return 0;
}

const CommandRegistration registration({"params", "count a model config's parameters by group", run_params});

}  // namespace
}  // namespace linea::cli

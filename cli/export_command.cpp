// `linea export RUN_DIR|CHECKPOINT --format hf OUT/`: a trained model (cli/trained_model.h) as an
// fla / Hugging Face checkpoint, config.json + model.safetensors (inference/hf_checkpoint.h).
#include <cstdio>
#include <stdexcept>
#include <string>

#include "cli/command.h"
#include "cli/command_line.h"
#include "cli/trained_model.h"
#include "inference/hf_checkpoint.h"

namespace linea::cli {
namespace {

constexpr const char* kUsage =
    "usage: linea export RUN_DIR|CHECKPOINT --format hf OUT/\n"
    "\n"
    "Writes the model of a run (its newest committed checkpoint; or CHECKPOINT, one step-N/) to OUT/\n"
    "as fla's Hugging Face format: config.json (fla's model_type: delta_net, gated_deltanet, kda, gla,\n"
    "retnet, hgrn, hgrn2, mamba2 or transformer, with its keys; hybrids in fla's attn block) and\n"
    "model.safetensors (fla's parameter names; short-conv weights as [C, 1, W]; Mamba-2's projections\n"
    "and convs fused as fla's in_proj and conv1d). Each file is written to a temporary and renamed.\n"
    "Models fla cannot express (gdn2, rwkv6, two linear mixers, attention with head_dim != d_model /\n"
    "heads, settings fla's model has no key for) are refused before anything is written, naming the\n"
    "key. `[model] init_from = \"hf:OUT\"` and `linea logits hf:OUT --config` read such a directory.\n";

int run_export(int argc, char** argv) {
  CommandLine flags("export", kUsage);
  if (const auto done = flags.option("format").positional(2, 2).parse(argc, argv)) return *done;
  flags.choice("format", "", {"hf"});  // the one format
  const TrainedModel trained = load_trained_model(flags.positional()[0]);
  inference::export_hf(*trained.model, flags.positional()[1]);
  std::printf("exported step %lld of %s to %s\n", static_cast<long long>(trained.step),
              trained.checkpoint.string().c_str(), flags.positional()[1].c_str());
  return 0;
}

const CommandRegistration registration({"export", "write a trained model as an fla / Hugging Face checkpoint",
                                        run_export});

}  // namespace
}  // namespace linea::cli

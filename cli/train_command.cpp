// `linea train [CONFIG.toml] [section.key=value ...]`: the main job (worker/trainer.h). With no
// CONFIG it trains configs/default.toml (looked up in the current directory, then in the source
// tree linea was built from) on the embedded default corpus.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "worker/run_config.h"
#include "worker/stop_signal.h"
#include "worker/trainer.h"

namespace linea::cli {
namespace {

constexpr const char* kUsage =
    "usage: linea train [CONFIG.toml] [section.key=value ...]\n"
    "\n"
    "Trains the model of CONFIG.toml into run.dir/run.name/ (default runs/default/): config.toml (the\n"
    "resolved configuration), metrics.jsonl (one JSON object per logged step: step, loss, lr,\n"
    "grad_norm, tokens, tokens_per_s, elapsed_s, and val_loss on eval steps) and\n"
    "checkpoints/step-NNNNNNNNN/. Without CONFIG: configs/default.toml, a small model on the\n"
    "embedded corpus (prepared on first use). Overrides such as train.steps=200 optimizer.lr=1e-3\n"
    "follow the config. A run resumes from its newest committed checkpoint (train.resume = auto,\n"
    "never or require); train.stop_at=N checkpoints and exits after step N, and the same command\n"
    "carries on later. SIGINT/SIGTERM stop after the current step with a checkpoint.\n"
    "\n"
    "Sections and keys: device; [run] name dir; [model] (see configs/models/); [optimizer] kind lr\n"
    "beta1 beta2 eps weight_decay decay_embeddings muon_momentum ns_steps grad_clip schedule\n"
    "warmup_steps lr_min_ratio wsd_decay_ratio; [train] steps stop_at batch_seqs micro_batch_seqs\n"
    "seq_len seed log_every eval_every eval_batches checkpoint_every keep_checkpoints resume threads;\n"
    "[data] path vocab_size eos_id verify_checksums.\n";

std::string default_config() {
  const std::filesystem::path local = "configs/default.toml";
  if (std::filesystem::exists(local)) return local.string();
  return (std::filesystem::path(LINEA_SOURCE_DIR) / local).string();
}

int run_train(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::string config_path = default_config();
  if (!args.empty() && args[0].find('=') == std::string::npos) {
    config_path = args[0];
    args.erase(args.begin());
  }
  const RunConfig config = load_run_config(config_path, args);
  install_stop_signal_handlers();
  const TrainSummary s = train(config, std::cerr);
  std::fprintf(stderr, "\n%s: steps %lld → %lld (%s), %.1fM tokens in all, %.1f s, %.0f tokens/s\n",
               s.complete ? "done" : "stopped", static_cast<long long>(s.start_step),
               static_cast<long long>(s.end_step), s.complete ? "complete" : "incomplete", double(s.tokens) / 1e6,
               s.seconds, s.tokens_per_s);
  if (!std::isnan(s.last_loss)) std::fprintf(stderr, "last loss %.4f", s.last_loss);
  if (!std::isnan(s.last_val_loss)) std::fprintf(stderr, ", last val_loss %.4f", s.last_val_loss);
  std::fprintf(stderr, "\ncheckpoints: longest stall %.0f ms; last one %.1f MB written in %.0f ms in the background\n",
               s.checkpoint_blocked_ms, double(s.checkpoint_bytes) / 1e6, s.checkpoint_write_ms);
  std::fprintf(stderr, "results in %s/%s/\n", config.dir.c_str(), config.name.c_str());
  return s.stop_signal ? 128 + s.stop_signal : 0;
}

const CommandRegistration registration({"train", "train a model (the main job)", run_train});

}  // namespace
}  // namespace linea::cli

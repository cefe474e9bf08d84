// `linea train [CONFIG.toml] [section.key=value ...]`: the main job (worker/trainer.h). With no
// CONFIG it trains configs/default.toml (looked up in the current directory, then in the source
// tree linea was built from) on the embedded default corpus. Started by an MPI launcher (mpirun,
// srun) it runs as one rank of the job (parallel/mpi_session.h). Errors: one that every rank knows
// (AgreedError: a bad config or layout, a failure some rank met and told the others) is printed
// by every rank, which then exits normally with status 1; any other error on one rank of several
// is printed and ends the whole job (MPI_Abort), so no rank is left waiting for it.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/command_line.h"
#include "parallel/error_agreement.h"
#include "parallel/mpi_session.h"
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
    "warmup_steps lr_min_ratio wsd_decay_ratio zero; [train] steps stop_at batch_seqs micro_batch_seqs\n"
    "seq_len seed log_every eval_every eval_batches checkpoint_every keep_checkpoints\n"
    "checkpoint_failures_allowed resume threads precision; [data] path vocab_size eos_id verify_checksums\n"
    "document_masking; [parallel] tp dp timeout_s validate.\n"
    "\n"
    "A failed checkpoint write is reported on the progress line and in metrics.jsonl\n"
    "(checkpoint_error); after more than train.checkpoint_failures_allowed (default 1) in a row the run\n"
    "stops with an error (exit status 1), its committed checkpoints kept. One linea train at a time\n"
    "in a run directory (the lock RUN_DIR/lock; a second is refused, naming the holder).\n"
    "\n"
    "Several ranks: mpirun -np N linea train ... (or srun --mpi=pmix ...): tp × dp must equal N (dp = 0:\n"
    "N / tp); each rank uses max(1, cores / ranks per node) threads unless train.threads or\n"
    "OMP_NUM_THREADS says otherwise. optimizer.zero (default: true when dp > 1) shards the optimizer\n"
    "state over the DP ranks. Checkpoints resume under any layout.\n";

std::string default_config() {
  const std::filesystem::path local = "configs/default.toml";
  if (std::filesystem::exists(local)) return local.string();
  return (std::filesystem::path(LINEA_SOURCE_DIR) / local).string();
}

int run_train(int argc, char** argv) {
  CommandLine flags("train", kUsage);
  flags
      .positional(0, CommandLine::kAny)  // e.g. --steps 5: settings are overrides
      .unknown_option_hint("settings are given as section.key=value overrides (e.g. train.steps=5)");
  if (const auto done = flags.parse(argc, argv)) return *done;
  std::vector<std::string> args = flags.positional();
  std::string config_path = default_config();
  if (!args.empty() && args[0].find('=') == std::string::npos) {
    config_path = args[0];
    args.erase(args.begin());
  }
  MpiSession session;
  const std::string who = session.world_size() > 1 ? "linea train (rank " + std::to_string(session.world_rank()) +
                                                         " of " + std::to_string(session.world_size()) + ")"
                                                   : "linea train";
  // A bad config is the same error on every rank: each says so and exits normally.
  std::optional<RunConfig> config;
  std::string config_error;
  try {
    config = load_run_config(config_path, args);
  } catch (const std::exception& e) {
    config_error = e.what();
  }
  if (session.world_size() > 1) config_error = gather_errors(MPI_COMM_WORLD, config_error, std::chrono::minutes(10));
  if (!config_error.empty()) {
    std::fprintf(stderr, "%s: error: %s\n", who.c_str(), config_error.c_str());
    return 1;
  }
  TrainSummary s;
  try {
    install_stop_signal_handlers();
    s = train(*config, std::cerr);
  } catch (const AgreedError& e) {
    std::fprintf(stderr, "%s: error: %s\n", who.c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", who.c_str(), e.what());
    if (session.world_size() > 1) {
      std::fprintf(stderr, "%s: ending the whole job\n", who.c_str());
      std::fflush(stderr);
      session.abort(1);
    }
    return 1;
  }
  if (session.world_rank() != 0) return s.stop_signal ? 128 + s.stop_signal : 0;
  std::fprintf(stderr, "\n%s: steps %lld → %lld (%s), %.1fM tokens in all, %.1f s, %.0f tokens/s\n",
               s.complete ? "done" : "stopped", static_cast<long long>(s.start_step),
               static_cast<long long>(s.end_step), s.complete ? "complete" : "incomplete", double(s.tokens) / 1e6,
               s.seconds, s.tokens_per_s);
  if (!std::isnan(s.last_loss)) std::fprintf(stderr, "last loss %.4f", s.last_loss);
  if (!std::isnan(s.last_val_loss)) std::fprintf(stderr, ", last val_loss %.4f", s.last_val_loss);
  std::fprintf(stderr,
               "\ncheckpoints: longest stall %.0f ms; last one %.1f MB%s written in %.0f ms in the background\n",
               s.checkpoint_blocked_ms, double(s.checkpoint_bytes) / 1e6,
               session.world_size() > 1 ? " (rank 0's part)" : "", s.checkpoint_write_ms);
  std::fprintf(stderr, "device %s, %s", s.device.c_str(), s.precision.c_str());
  if (s.device == "cuda") std::fprintf(stderr, ", peak GPU memory %.2f GiB", double(s.peak_device_bytes) / (1 << 30));
  std::fprintf(stderr, "\nresults in %s/%s/\n", config->dir.c_str(), config->name.c_str());
  return s.stop_signal ? 128 + s.stop_signal : 0;
}

const CommandRegistration registration({"train", "train a model (the main job)", run_train});

}  // namespace
}  // namespace linea::cli

// bench_train: end-to-end training throughput of one run config, on whatever device it names: the
// trainer itself (data loader, forward/backward, optimizer, everything `linea train` does) for
// warm-up + timed steps in a fresh run directory, stopped right after the last timed step (no final
// evaluation or checkpoint). Prints one JSON line: the median step time over the timed steps,
// tokens/s, FLOPs per token, MFU against a bf16 GEMM ceiling, peak GPU memory (what linea allocated)
// over the whole run and over the timed steps alone (after the warm-up, whose first step grows the
// arenas), and the run's projected training time: its train.steps at the median step time
// (evaluations and checkpoints left out; scripts/time-sweep.sh sums it over a sweep's runs).
//   bench_train CONFIG.toml [--warmup W] [--steps S] [--peak-tflops P] [section.key=value ...]
//
// FLOPs per token (a multiply-add is 2), forward + backward:
//   6 · parameters (embedding included, as shared/ANCHORS.md counts)
//   + per layer, its sequence mixing (MixerFamily::mixing_flops_per_token), e.g. per delta-rule
//     head the chunked algorithm (C = 64; reference/mixers.md §2.7, with the backward's
//     recompute): 22·d_k·d_v + 24·C·d_k + 14·C·d_v + (13/3)·C²; per softmax query head, causal
//     over a T-token sequence (window w caps the context), forward 2·c·(2·head_dim) with c the
//     mean context (T/2, or w for long T) and the backward twice that: 12 · c · head_dim.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/device_memory.h"
#include "model/mixer_registry.h"
#include "model/parameter_count.h"
#include "worker/run_config.h"
#include "worker/trainer.h"

namespace {

using namespace linea;

// Thrown from the step callback after the last timed step: the run ends there, without the final
// evaluation and checkpoint (with one rank the trainer lets it through unchanged).
struct TimedStepsDone {};

double parse_number(const char* flag, const char* value) {
  char* end = nullptr;
  const double v = std::strtod(value, &end);
  if (!*value || *end || !(v > 0)) {
    std::fprintf(stderr, "bench_train: %s expects a positive number, got '%s'\n", flag, value);
    std::exit(2);
  }
  return v;
}

double flops_per_token(const ModelConfig& c, int64_t seq_len) {
  double flops = 6.0 * double(count_parameters(c).total);
  for (int64_t layer = 0; layer < c.layers; ++layer) {
    const MixerFamily& family = mixer_family(c.layer_mixers[static_cast<size_t>(layer)]);
    flops += family.mixing_flops_per_token(c.layer_config(layer), seq_len);
  }
  return flops;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help")) {
    std::fprintf(stderr, "usage: bench_train CONFIG.toml [--warmup W] [--steps S] [--peak-tflops P] [key=value ...]\n");
    return argc < 2 ? 2 : 0;
  }
  int64_t warmup = 3, steps = 20;
  double peak_tflops = 800;  // the measured bf16 GEMM ceiling of one H200 (shared/ANCHORS.md)
  std::vector<std::string> overrides;
  for (int i = 2; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--warmup") && has_value) {
      warmup = static_cast<int64_t>(parse_number(argv[i], argv[i + 1])), ++i;
    } else if (!std::strcmp(argv[i], "--steps") && has_value) {
      steps = static_cast<int64_t>(parse_number(argv[i], argv[i + 1])), ++i;
    } else if (!std::strcmp(argv[i], "--peak-tflops") && has_value) {
      peak_tflops = parse_number(argv[i], argv[i + 1]), ++i;
    } else {
      overrides.emplace_back(argv[i]);
    }
  }
  try {
    std::string dir_pattern = (std::filesystem::temp_directory_path() / "bench-train-XXXXXX").string();
    if (!mkdtemp(dir_pattern.data())) throw std::runtime_error("mkdtemp failed for " + dir_pattern);
    const std::filesystem::path dir = dir_pattern;
    const std::vector<std::string> run_overrides = overrides;
    for (std::string o : {"run.dir=\"" + dir.string() + "\"", "train.steps=" + std::to_string(warmup + steps),
                          std::string("train.resume=\"never\""), std::string("train.eval_every=0"),
                          std::string("train.eval_batches=1"), std::string("train.checkpoint_every=0")}) {
      overrides.insert(overrides.begin(), o);  // the command line's own overrides come last and win
    }
    const RunConfig config = load_run_config(argv[1], overrides);
    // The run as configured (its file and the command line's overrides), for the projection.
    const int64_t run_steps = load_run_config(argv[1], run_overrides).last_step();
    std::vector<double> step_seconds;
    double last_loss = 0;
    TrainOptions options;
    const double tokens_per_step = double(config.train.batch_seqs * config.train.seq_len);
    size_t warmup_peak = 0;  // the GPU peak up to the end of the warm-up, before the counter restarts
    options.on_step = [&](const nlohmann::json& m) {
      const int64_t step = m["step"].get<int64_t>();
      if (step == warmup) {
        warmup_peak = cuda_peak_allocated_bytes();
        cuda_reset_peak_allocated_bytes();
      }
      if (step > warmup) step_seconds.push_back(tokens_per_step / m["tokens_per_s"].get<double>());
      last_loss = m["loss"].get<double>();
      if (step == warmup + steps) throw TimedStepsDone{};
    };
    std::ostringstream log;
    try {
      train(config, log, options);
    } catch (const TimedStepsDone&) {
    }
    const bool gpu = config.device == "cuda" || (config.device == "auto" && cuda_device_available());
    std::filesystem::remove_all(dir);
    if (step_seconds.empty()) throw std::runtime_error("no timed steps");
    std::sort(step_seconds.begin(), step_seconds.end());
    const double step_s = step_seconds[step_seconds.size() / 2];
    const double flops = flops_per_token(config.model, config.train.seq_len);
    const double tokens_per_s = tokens_per_step / step_s;
    const nlohmann::json line = {
        {"bench", "train"},
        {"config", argv[1]},
        {"device", gpu ? "cuda" : "cpu"},
        {"precision", config.train.precision == "auto" ? (gpu ? "bf16" : "f32") : config.train.precision},
        {"mixer", config.model.mixers_description()},
        {"parameters", count_parameters(config.model).total},
        {"seq_len", config.train.seq_len},
        {"tokens_per_step", int64_t(tokens_per_step)},
        {"micro_batch_seqs", config.train.micro_batch_seqs},
        {"timed_steps", int64_t(step_seconds.size())},
        {"step_ms", 1e3 * step_s},
        {"step_ms_min", 1e3 * step_seconds.front()},
        {"step_ms_max", 1e3 * step_seconds.back()},
        {"tokens_per_s", tokens_per_s},
        {"gflop_per_token", flops / 1e9},
        {"mfu", tokens_per_s * flops / (peak_tflops * 1e12)},
        {"peak_gpu_gib", double(std::max(warmup_peak, cuda_peak_allocated_bytes())) / double(1 << 30)},
        {"timed_peak_gpu_gib", double(cuda_peak_allocated_bytes()) / double(1 << 30)},
        {"last_loss", last_loss},
        {"run_steps", run_steps},
        {"projected_run_s", double(run_steps) * step_s}};
    std::printf("%s\n", line.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    return 1;
  }
  return 0;
}

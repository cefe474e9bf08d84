// bench_train: end-to-end training throughput of one run config, on whatever device it names: the
// trainer itself (data loader, forward/backward, optimizer, everything `linea train` does) for
// warm-up + timed steps in a fresh run directory, stopped right after the last timed step (no final
// evaluation or checkpoint). Prints one JSON line: the median step time over the timed steps,
// tokens/s, FLOPs per token, MFU against a bf16 GEMM ceiling, peak GPU memory (what linea allocated)
// over the whole run and over the timed steps alone (after the warm-up, whose first step grows the
// arenas), and the run's projected training time: its train.steps at the median step time
// (evaluations and checkpoints left out; scripts/time-sweep.sh sums it over a sweep's runs).
//   bench_train CONFIG.toml [--warmup W] [--steps S] [--peak-tflops P] [--op-profile FILE] [section.key=value ...]
// --op-profile FILE: the op profile (kernels/op_profile.h) of the timed steps but the last (which
// ends in the run's final evaluation; so S ≥ 2) into FILE, one JSON line per op and signature,
// largest first: calls and milliseconds per step and the share of the median step; the ten largest
// also on stderr. The profile slows the steps it times a little (its events and read-backs): take
// throughput from a run without it.
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
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/device_memory.h"
#include "kernels/op_profile.h"
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

// The op profile of `steps` timed steps of median length step_ms into `path` (see the header).
void write_op_profile(const std::string& path, int64_t steps, double step_ms) {
  const std::vector<ops::OpProfileEntry> entries = ops::op_profile_entries();
  std::ofstream out(path);
  if (!out) throw std::runtime_error("--op-profile: cannot write " + path);
  double covered_ms = 0;
  for (const ops::OpProfileEntry& e : entries) covered_ms += e.total_ms / double(steps);
  std::fprintf(stderr, "op profile of %lld steps (%.1f ms a step, %.1f in ops), largest first:\n",
               static_cast<long long>(steps), step_ms, covered_ms);
  for (size_t i = 0; i < entries.size(); ++i) {
    const ops::OpProfileEntry& e = entries[i];
    const double ms = e.total_ms / double(steps);
    out << nlohmann::json{{"op", e.op},
                          {"signature", e.signature},
                          {"calls_per_step", double(e.calls) / double(steps)},
                          {"ms_per_step", ms},
                          {"share_of_step", ms / step_ms}}
               .dump()
        << "\n";
    if (i < 10)
      std::fprintf(stderr, "  %8.2f ms %5.1f%%  %s %s\n", ms, 100 * ms / step_ms, e.op.c_str(), e.signature.c_str());
  }
  if (!out.flush()) throw std::runtime_error("--op-profile: writing " + path + " failed");
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
    std::fprintf(stderr,
                 "usage: bench_train CONFIG.toml [--warmup W] [--steps S] [--peak-tflops P] [--op-profile FILE] "
                 "[key=value ...]\n");
    return argc < 2 ? 2 : 0;
  }
  int64_t warmup = 3, steps = 20;
  double peak_tflops = 800;  // the measured bf16 GEMM ceiling of one H200 (shared/ANCHORS.md)
  std::string op_profile_path;
  std::vector<std::string> overrides;
  for (int i = 2; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--warmup") && has_value) {
      warmup = static_cast<int64_t>(parse_number(argv[i], argv[i + 1])), ++i;
    } else if (!std::strcmp(argv[i], "--steps") && has_value) {
      steps = static_cast<int64_t>(parse_number(argv[i], argv[i + 1])), ++i;
    } else if (!std::strcmp(argv[i], "--peak-tflops") && has_value) {
      peak_tflops = parse_number(argv[i], argv[i + 1]), ++i;
    } else if (!std::strcmp(argv[i], "--op-profile") && has_value) {
      op_profile_path = argv[++i];
    } else {
      overrides.emplace_back(argv[i]);
    }
  }
  if (!op_profile_path.empty() && steps < 2) {
    std::fprintf(stderr, "bench_train: --op-profile needs --steps of at least 2 (the last step is not profiled)\n");
    return 2;
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
        if (!op_profile_path.empty()) ops::op_profile_start();
      }
      if (step == warmup + steps - 1) ops::op_profile_stop();
      if (step > warmup) step_seconds.push_back(tokens_per_step / m["tokens_per_s"].get<double>());
      last_loss = m["loss"].get<double>();
      if (step == warmup + steps) throw TimedStepsDone{};
    };
    std::ostringstream log;
    try {
      train(config, log, options);
    } catch (const TimedStepsDone&) {
    }
    ops::op_profile_stop();
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
    if (!op_profile_path.empty()) write_op_profile(op_profile_path, steps - 1, 1e3 * step_s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    return 1;
  }
  return 0;
}

#include "worker/trainer.h"

#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "checkpoint/async_checkpoint_writer.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_directory.h"
#include "checkpoint/durable_file.h"
#include "coordinator/client.h"
#include "data/dataset.h"
#include "data/default_corpus.h"
#include "data/loader.h"
#include "kernels/device_memory.h"
#include "worker/grad_clip.h"
#include "worker/lr_schedule.h"
#include "worker/metrics_log.h"
#include "worker/model.h"
#include "worker/optimizer.h"
#include "worker/stop_signal.h"

namespace linea {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

constexpr std::string_view kModelPrefix = "model/";
constexpr std::string_view kOptimizerPrefix = "optimizer/";

std::string human_count(double x) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(x >= 1e9 ? 2 : 1);
  if (x >= 1e9)
    os << x / 1e9 << "G";
  else if (x >= 1e6)
    os << x / 1e6 << "M";
  else if (x >= 1e3)
    os << x / 1e3 << "k";
  else
    os << std::setprecision(0) << x;
  return os.str();
}

std::string human_duration(double s) {
  std::ostringstream os;
  const auto total = static_cast<int64_t>(s + 0.5);
  if (total >= 3600)
    os << total / 3600 << "h" << std::setw(2) << std::setfill('0') << (total % 3600) / 60 << "m";
  else if (total >= 60)
    os << total / 60 << "m" << std::setw(2) << std::setfill('0') << total % 60 << "s";
  else
    os << total << "s";
  return os.str();
}

// The device the run trains on. Only the CPU path exists so far.
void check_device(const RunConfig& c, std::ostream& out) {
  if (c.device == "cuda") {
    throw std::invalid_argument(c.source +
                                ": device: training on CUDA is not implemented yet; use \"cpu\" or \"auto\"");
  }
  if (c.device == "auto" && cuda_device_available()) {
    out << "note: a CUDA device is present, but GPU training is not implemented yet: training on the CPU\n";
  }
}

fs::path data_directory(const RunConfig& c) {
  if (c.data.path != "default") return c.data.path;
  data::DefaultCorpusOptions options;
  options.threads = std::max(1, omp_get_max_threads());
  return data::ensure_default_corpus(options);
}

// Mean loss over the validation batches (each batch has the same number of targets).
double evaluate(Model& model, data::ValidationIterator& val) {
  val.reset();
  data::TokenBatch batch;
  double sum = 0;
  int64_t batches = 0;
  while (val.next(batch)) {
    const auto n = static_cast<int64_t>(batch.inputs.size());
    sum += model.evaluate(Tensor::view(batch.inputs.data(), {n}, DType::i32),
                          Tensor::view(batch.targets.data(), {n}, DType::i32), batch.layout);
    ++batches;
  }
  return batches ? sum / static_cast<double>(batches) : std::numeric_limits<double>::quiet_NaN();
}

CheckpointState make_checkpoint(const RunConfig& c, int64_t step, int64_t tokens, const ParameterSet& params,
                                const Optimizer& optimizer, const data::Loader& loader) {
  CheckpointState s;
  s.step = step;
  s.tokens = tokens;
  s.config = c.resolved;
  s.data_position = loader.position().to_json();
  OptimizerState opt = optimizer.export_state();
  s.trainer_state = {{"optimizer_kind", opt.kind}, {"optimizer_step", opt.step}};
  for (const Parameter& p : params.params()) s.tensors.emplace_back(std::string(kModelPrefix) + p.name, p.value);
  for (auto& [key, tensor] : opt.tensors) s.tensors.emplace_back(std::string(kOptimizerPrefix) + key, tensor);
  return s;
}

// Puts parameters, optimizer state and loader position back as they were at the checkpoint.
void restore_checkpoint(const CheckpointState& s, const std::string& where, ParameterSet& params, Optimizer& optimizer,
                        data::Loader& loader) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, tensor] : s.tensors) by_name[name] = &tensor;
  for (Parameter& p : params.params()) {
    auto it = by_name.find(std::string(kModelPrefix) + p.name);
    if (it == by_name.end()) {
      throw std::runtime_error(where + ": has no parameter '" + p.name + "' (was the model config changed?)");
    }
    if (it->second->shape() != p.value.shape() || it->second->dtype() != p.value.dtype()) {
      throw std::runtime_error(where + ": parameter '" + p.name + "' is " + it->second->describe() + ", expected " +
                               p.value.describe() + " (was the model config changed?)");
    }
    p.value.copy_from(*it->second);
  }
  OptimizerState opt;
  try {
    opt.kind = s.trainer_state.at("optimizer_kind").get<std::string>();
    opt.step = s.trainer_state.at("optimizer_step").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(where + ": trainer_state: expected optimizer_kind and optimizer_step: " + e.what());
  }
  for (const auto& [name, tensor] : s.tensors) {
    if (name.starts_with(kOptimizerPrefix)) opt.tensors[name.substr(kOptimizerPrefix.size())] = tensor;
  }
  optimizer.import_state(opt, params);
  loader.seek(data::LoaderPosition::from_json(s.data_position, where));
}

// One line that redraws itself on a terminal, or a plain line every few steps in a log file.
class ProgressLine {
 public:
  ProgressLine(std::ostream& out, int64_t last_step)
      : out_(out), tty_(isatty(STDERR_FILENO)), every_(std::max<int64_t>(1, last_step / 40)) {}
  void update(int64_t step, int64_t last_step, double loss, double tokens_per_s, double seconds_per_step) {
    if (!tty_ && step % every_ != 0 && step != last_step) return;
    std::ostringstream os;
    os << "step " << step << "/" << last_step << " | loss " << std::fixed << std::setprecision(4) << loss << " | "
       << human_count(tokens_per_s) << " tok/s | ETA " << human_duration(seconds_per_step * double(last_step - step));
    if (tty_) {
      out_ << "\r\033[K" << os.str() << std::flush;
      open_ = true;
    } else {
      out_ << os.str() << "\n" << std::flush;
    }
  }
  // Ends the redrawn line before other output.
  void finish_line() {
    if (open_) out_ << "\n";
    open_ = false;
  }

 private:
  std::ostream& out_;
  bool tty_;
  int64_t every_;
  bool open_ = false;
};

}  // namespace

TrainSummary train(const RunConfig& c, std::ostream& out) {
  check_device(c, out);
  if (c.train.threads > 0) omp_set_num_threads(static_cast<int>(c.train.threads));
  const fs::path run_dir = fs::path(c.dir) / c.name;
  const fs::path checkpoint_root = run_dir / "checkpoints";
  fs::create_directories(run_dir);

  // Data.
  const fs::path data_dir = data_directory(c);
  data::DatasetOptions data_options;
  data_options.vocab_size = c.data.vocab_size;
  data_options.eos_id = static_cast<int32_t>(c.data.eos_id);
  data_options.verify_checksums = c.data.verify_checksums;
  auto dataset = data::Dataset::open(data_dir, data_options);
  if (dataset->vocab_size() > c.model.vocab) {
    throw std::invalid_argument(c.source + ": model.vocab: the data in " + data_dir.string() + " has " +
                                std::to_string(dataset->vocab_size()) +
                                " token ids; expected model.vocab >= that, got " + std::to_string(c.model.vocab));
  }
  data::LoaderConfig loader_config;
  loader_config.seq_len = c.train.seq_len;
  loader_config.global_batch_seqs = c.train.batch_seqs;
  loader_config.micro_batch_seqs = c.train.micro_batch_seqs;
  loader_config.seed = c.train.seed;
  data::Loader loader(dataset, loader_config);
  data::ValidationIterator val(dataset, c.train.seq_len, c.train.batch_seqs, 0, 1, c.train.eval_batches);

  // Model, optimizer, schedule.
  Model model(c.model, DType::f32);
  model.init_parameters(c.train.seed);
  ParameterSet& params = model.params();
  std::unique_ptr<Optimizer> optimizer = make_optimizer(c.optim);
  const LrSchedule schedule(c.optim, c.train.steps);

  // Resume.
  TrainSummary summary;
  int64_t tokens = 0;
  if (c.train.resume != ResumeMode::never) {
    std::optional<CheckpointState> checkpoint = load_latest_checkpoint(checkpoint_root);
    if (!checkpoint && c.train.resume == ResumeMode::require) {
      throw std::runtime_error(checkpoint_root.string() +
                               ": train.resume = \"require\" but there is no committed checkpoint");
    }
    if (checkpoint) {
      const std::string where = (checkpoint_root / checkpoint_directory_name(checkpoint->step)).string();
      restore_checkpoint(*checkpoint, where, params, *optimizer, loader);
      summary.start_step = checkpoint->step;
      tokens = checkpoint->tokens;
      if (checkpoint->config != c.resolved) {
        out << "warning: the configuration differs from the one " << where << " was written with\n";
      }
      out << "resumed from " << where << " (step " << checkpoint->step << ", " << human_count(double(tokens))
          << " tokens)\n";
    }
  }
  write_file_atomically(run_dir / "config.toml", c.resolved);
  MetricsLog metrics(run_dir / "metrics.jsonl", summary.start_step);
  AsyncCheckpointWriter writer(checkpoint_root, static_cast<int>(c.train.keep_checkpoints));

  // Progress for a coordinator that launched this job (nullptr otherwise); a silent job is a hung one.
  std::unique_ptr<coordinator::HeartbeatClient> heartbeats = coordinator::HeartbeatClient::from_env();
  int64_t committed_step = summary.start_step > 0 ? summary.start_step : -1;

  const int64_t last_step = c.last_step();
  const int64_t micro_steps = c.train.batch_seqs / c.train.micro_batch_seqs;
  const int64_t tokens_per_step = c.train.batch_seqs * c.train.seq_len;
  out << "run " << run_dir.string() << ": " << human_count(double(params.numel())) << " parameters ("
      << mixer_kind_name(c.model.mixer) << ", " << c.model.layers << " layers), " << omp_get_max_threads()
      << " threads, data " << data_dir.string() << " ("
      << human_count(double(dataset->split(data::Split::train).num_tokens())) << " train tokens), " << tokens_per_step
      << " tokens/step, steps " << summary.start_step << " → " << last_step << " of " << c.train.steps << "\n";
  summary.end_step = summary.start_step;
  summary.tokens = tokens;
  if (summary.start_step >= c.train.steps) {
    out << "the run is already complete (step " << summary.start_step << ")\n";
    summary.complete = true;
    return summary;
  }

  auto save = [&](int64_t step) {
    const auto t0 = Clock::now();
    writer.save(make_checkpoint(c, step, tokens, params, *optimizer, loader));
    summary.checkpoint_blocked_ms = std::max(summary.checkpoint_blocked_ms, 1e3 * seconds_since(t0));
  };

  ProgressLine progress(out, last_step);
  const auto run_start = Clock::now();
  double step_seconds_avg = 0;
  for (int64_t step = summary.start_step + 1; step <= last_step; ++step) {
    const auto step_start = Clock::now();
    const double lr = schedule.at(step - 1);
    params.zero_grads();
    double loss = 0;
    for (int64_t m = 0; m < micro_steps; ++m) {
      data::TokenBatch batch = loader.next();
      const auto n = static_cast<int64_t>(batch.inputs.size());
      loss += model.forward_backward(Tensor::view(batch.inputs.data(), {n}, DType::i32),
                                     Tensor::view(batch.targets.data(), {n}, DType::i32), batch.layout,
                                     1.0 / static_cast<double>(micro_steps)) /
              static_cast<double>(micro_steps);
    }
    const double norm = c.optim.grad_clip > 0 ? clip_grad_norm(params, c.optim.grad_clip) : grad_norm(params);
    if (std::isfinite(loss) && std::isfinite(norm)) {
      optimizer->step(params, lr);
    } else {
      progress.finish_line();
      out << "warning: step " << step << ": non-finite loss " << loss << " or gradient norm " << norm
          << ": update skipped\n";
    }
    tokens += tokens_per_step;
    const double step_seconds = seconds_since(step_start);
    step_seconds_avg = step == summary.start_step + 1 ? step_seconds : 0.9 * step_seconds_avg + 0.1 * step_seconds;
    summary.end_step = step;
    summary.tokens = tokens;
    summary.last_loss = loss;

    const bool eval_step = step == c.train.steps || (c.train.eval_every > 0 && step % c.train.eval_every == 0);
    nlohmann::json line = {{"step", step},
                           {"loss", loss},
                           {"lr", lr},
                           {"grad_norm", norm},
                           {"tokens", tokens},
                           {"tokens_per_s", double(tokens_per_step) / step_seconds},
                           {"elapsed_s", seconds_since(run_start)}};
    if (eval_step) {
      summary.last_val_loss = evaluate(model, val);
      line["val_loss"] = summary.last_val_loss;
    }
    if (eval_step || step % c.train.log_every == 0 || step == last_step) metrics.append(line);
    progress.update(step, last_step, loss, double(tokens_per_step) / step_seconds, step_seconds_avg);
    if (eval_step) {
      progress.finish_line();
      out << "step " << step << ": val_loss " << std::fixed << std::setprecision(4) << summary.last_val_loss << "\n";
    }

    if (heartbeats) {
      if (!writer.last_error() && writer.last_stats().step > committed_step) committed_step = writer.last_stats().step;
      coordinator::Heartbeat beat;
      beat.step = step;
      beat.loss = loss;
      beat.tokens_per_s = double(tokens_per_step) / step_seconds;
      if (eval_step) beat.val_loss = summary.last_val_loss;
      beat.checkpoint_step = committed_step;
      heartbeats->heartbeat(beat);
    }

    summary.stop_signal = stop_signal();
    const bool checkpoint_step = (c.train.checkpoint_every > 0 && step % c.train.checkpoint_every == 0) ||
                                 step == last_step || summary.stop_signal != 0;
    if (checkpoint_step) save(step);
    if (summary.stop_signal != 0) {
      progress.finish_line();
      out << "stopping at step " << step << " on signal " << summary.stop_signal << "\n";
      break;
    }
  }
  progress.finish_line();
  writer.wait();
  if (auto error = writer.last_error()) throw std::runtime_error("checkpoint write failed: " + *error);
  summary.checkpoint_write_ms = writer.last_stats().write_ms;
  summary.checkpoint_bytes = writer.last_stats().bytes;
  summary.seconds = seconds_since(run_start);
  const int64_t steps_done = summary.end_step - summary.start_step;
  summary.tokens_per_s = summary.seconds > 0 ? double(steps_done * tokens_per_step) / summary.seconds : 0;
  summary.complete = summary.end_step >= c.train.steps;
  return summary;
}

}  // namespace linea

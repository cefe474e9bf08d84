#include "worker/trainer.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>

#include "checkpoint/async_checkpoint_writer.h"
#include "checkpoint/checkpoint_directory.h"
#include "coordinator/client.h"
#include "data/atomic_file.h"
#include "data/dataset.h"
#include "data/default_corpus.h"
#include "data/document_source.h"
#include "data/loader.h"
#include "data/prepare.h"
#include "data/streaming_loader.h"
#include "kernels/device_memory.h"
#include "parallel/error_agreement.h"
#include "parallel/mpi_comm.h"
#include "parallel/mpi_error.h"
#include "parallel/process_grid.h"
#include "worker/distributed_optimizer.h"
#include "worker/lr_schedule.h"
#include "worker/metrics_log.h"
#include "worker/model.h"
#include "worker/stop_signal.h"
#include "worker/thread_count.h"
#include "worker/training_checkpoint.h"

namespace linea {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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

// Where and in which precision the run computes.
struct Placement {
  Device device = Device::cpu;
  DType compute = DType::f32;  // activations and compute weights (masters are f32)
};

// device (auto: cuda when a GPU is visible) and train.precision (auto: bf16 on cuda), or an error
// naming the key: cuda without a CUDA build or device, bf16 on the cpu.
Placement resolve_placement(const RunConfig& c) {
  Placement p;
  if (c.device == "cuda" && !cuda_device_available()) {
    throw std::invalid_argument(c.source + ": device = \"cuda\", but " +
                                (cuda_backend_built()
                                     ? "no CUDA device is visible"
                                     : "this build of linea has no CUDA backend (configure with LINEA_CUDA=ON)") +
                                "; use \"cpu\" or \"auto\"");
  }
  p.device = c.device == "cuda" || (c.device == "auto" && cuda_device_available()) ? Device::cuda : Device::cpu;
  const std::string& precision = c.train.precision;
  if (precision == "bf16" && p.device == Device::cpu) {
    throw std::invalid_argument(c.source + ": train.precision = \"bf16\" needs a CUDA device; device = \"" + c.device +
                                "\" trains on the cpu, in \"f32\"");
  }
  p.compute = precision == "bf16" || (precision == "auto" && p.device == Device::cuda) ? DType::bf16 : DType::f32;
  return p;
}

fs::path data_directory(const RunConfig& c) {
  if (c.data.path != "default") return c.data.path;
  data::DefaultCorpusOptions options;
  options.threads = std::max(1, omp_get_max_threads());
  return data::ensure_default_corpus(options);
}

// What a parquet stream reads (data.path = "parquet:GLOB"), from the [data] table.
data::StreamingConfig streaming_config(const RunConfig& c, const data::LoaderConfig& loader) {
  data::StreamingConfig s;
  try {
    s.files = data::expand_inputs({c.data.parquet_glob()}, "data.path");
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(c.source + ": " + e.what());
  }
  for (const auto& f : s.files) {
    if (!data::is_parquet_name(f)) {
      throw std::invalid_argument(c.source + ": data.path: " + f.string() + " is not a .parquet file");
    }
  }
  s.parquet.text_column = c.data.text_field;
  s.parquet.filter = data::RowFilter::parse(c.data.where.empty() ? std::vector<std::string>{}
                                                                 : std::vector<std::string>{c.data.where});
  s.parquet.threads = static_cast<int>(c.data.threads);
  try {
    s.tokenizer = data::TokenizerChoice::parse(c.data.tokenizer, "").load();
  } catch (const std::exception& e) {
    throw std::runtime_error(c.source + ": data.tokenizer: " + e.what());
  }
  s.val_docs = c.data.val_docs;
  s.threads = static_cast<int>(c.data.threads);
  s.loader = loader;
  return s;
}

// Mean loss over the targets of this rank's validation micro-batches.
double evaluate(Model& model, data::ValidationIterator& val) {
  val.reset();
  data::TokenBatch batch;
  double sum = 0;
  int64_t targets = 0;
  while (val.next(batch)) {
    const auto n = static_cast<int64_t>(batch.inputs.size());
    const auto count = static_cast<int64_t>(
        std::count_if(batch.targets.begin(), batch.targets.end(), [](int32_t t) { return t >= 0; }));
    sum += double(count) * model.evaluate(Tensor::view(batch.inputs.data(), {n}, DType::i32),
                                          Tensor::view(batch.targets.data(), {n}, DType::i32), batch.layout);
    targets += count;
  }
  return targets ? sum / static_cast<double>(targets) : std::numeric_limits<double>::quiet_NaN();
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

// An error every rank finds alike (from the same configuration): AgreedError with several ranks,
// so that no rank aborts the others before they have said it too; E alone.
template <class E>
[[noreturn]] void throw_alike(const Communicator& world, const std::string& message) {
  if (world.size() > 1) throw AgreedError(message);
  throw E(message);
}

// The grid of [parallel] tp × dp, with the keys named when the layout does not fit the ranks
// (ProcessGrid::create reaches the same verdict on every rank).
ProcessGrid make_grid(const RunConfig& c, MPI_Comm world) {
  CommunicatorOptions options;
  options.validate = c.parallel.validate;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(c.parallel.timeout_s * 1000));
  try {
    return ProcessGrid::create({static_cast<int>(c.parallel.tp), static_cast<int>(c.parallel.dp)}, options, world);
  } catch (const std::invalid_argument& e) {
    const std::string message = c.source + ": parallel.tp = " + std::to_string(c.parallel.tp) +
                                ", parallel.dp = " + std::to_string(c.parallel.dp) +
                                (c.parallel.dp == 0 ? " (ranks / tp)" : "") + ": " + e.what();
    if (mpi_is_initialized() && comm_size(world) > 1) throw AgreedError(message);
    throw std::invalid_argument(message);
  }
}

// Every rank must train the same configuration: a config file that differs between nodes would
// otherwise make them disagree silently.
void check_same_config(Communicator& world, const RunConfig& c) {
  if (world.size() == 1) return;
  Tensor mine = Tensor::empty({1}, DType::i64);
  mine.data<int64_t>()[0] = static_cast<int64_t>(std::hash<std::string>{}(c.resolved));
  Tensor rank0 = mine.clone();
  world.broadcast(rank0, 0);
  const bool same = mine.data<int64_t>()[0] == rank0.data<int64_t>()[0];
  const std::string errors = agree_on_errors(world, same ? "" : "its resolved configuration differs from rank 0's");
  if (!errors.empty()) throw AgreedError(c.source + ": the ranks were given different configurations: " + errors);
}

// A value of this rank averaged over `group`.
double group_mean(Communicator& group, double value) {
  Tensor t = Tensor::empty({1}, DType::f64);
  t.data<double>()[0] = value;
  group.all_reduce(t, ReduceOp::avg);
  return t.data<double>()[0];
}

// The stop signal one rank received, known to all (the first rank's, in rank order), so that they
// all stop after the same step.
int agreed_stop_signal(Communicator& world) {
  Tensor mine = Tensor::empty({1}, DType::i64);
  mine.data<int64_t>()[0] = stop_signal();
  Tensor all = Tensor::empty({world.size()}, DType::i64);
  world.all_gather(mine, all);
  for (int r = 0; r < world.size(); ++r) {
    if (all.data<int64_t>()[r] != 0) return static_cast<int>(all.data<int64_t>()[r]);
  }
  return 0;
}

}  // namespace

TrainSummary train(const RunConfig& c, std::ostream& log, const TrainOptions& options) {
  const auto setup_start = Clock::now();
  ProcessGrid grid = make_grid(c, options.world);
  const bool lead = grid.world_rank() == 0;
  std::ostream quiet(nullptr);
  std::ostream& out = lead ? log : quiet;
  Communicator& world = grid.comm(GridAxis::world);
  Communicator& dp = grid.comm(GridAxis::dp);
  const Placement placement = resolve_placement(c);  // the same verdict on every rank
  check_same_config(world, c);
  if (placement.device == Device::cuda) grid.enable_cuda();  // GPU local_rank; NCCL communicators
  // Gradients and weights move over the communicators of the device they live on.
  Communicator& dp_params = grid.comm(GridAxis::dp, placement.device);
  const ThreadChoice threads = choose_threads(this_process_thread_facts(c.train.threads, grid.local_size()));
  omp_set_num_threads(threads.count);
  out << threads.note;
  const bool zero = c.optim.zero.value_or(grid.dp_size() > 1);
  const fs::path run_dir = fs::path(c.dir) / c.name;
  const fs::path checkpoint_root = run_dir / "checkpoints";
  PendingErrors errors(world);

  // Data: rank 0 builds the default corpus on first use while the others wait; a parquet stream is
  // read by every rank.
  const bool streaming = !c.data.parquet_glob().empty();
  fs::path data_dir;
  errors.run([&] {
    if (!lead) return;
    fs::create_directories(run_dir);
    if (!streaming) data_dir = data_directory(c);
  });
  errors.agree("preparing the run");
  std::unique_ptr<data::TrainingBatches> loader;
  std::unique_ptr<data::ValidationIterator> val;
  errors.run([&] {
    // Each DP replica takes its share of every global batch; the TP ranks of a replica the same one.
    if (c.train.batch_seqs % (grid.dp_size() * c.train.micro_batch_seqs) != 0) {
      throw std::invalid_argument(c.source + ": train.batch_seqs = " + std::to_string(c.train.batch_seqs) +
                                  " must be a multiple of dp × train.micro_batch_seqs = " +
                                  std::to_string(grid.dp_size()) + " × " + std::to_string(c.train.micro_batch_seqs) +
                                  " (every data-parallel replica takes an equal share of each global batch)");
    }
    data::LoaderConfig loader_config;
    loader_config.seq_len = c.train.seq_len;
    loader_config.global_batch_seqs = c.train.batch_seqs;
    loader_config.micro_batch_seqs = c.train.micro_batch_seqs;
    loader_config.rank = grid.dp_rank();
    loader_config.world = grid.dp_size();
    loader_config.seed = c.train.seed;
    loader_config.document_masking = c.data.document_masking;
    std::shared_ptr<const data::TokenStream> val_tokens;
    int32_t eos_id = -1;
    int64_t vocab = 0;
    std::string where;
    if (streaming) {
      auto stream = std::make_unique<data::StreamingLoader>(streaming_config(c, loader_config));
      val_tokens = stream->val_stream();
      eos_id = stream->eos_id();
      vocab = stream->vocab_size();
      where = c.data.path;
      loader = std::move(stream);
    } else {
      if (!lead) data_dir = data_directory(c);
      data::DatasetOptions data_options;
      data_options.vocab_size = c.data.vocab_size;
      data_options.eos_id = static_cast<int32_t>(c.data.eos_id);
      data_options.verify_checksums = c.data.verify_checksums;
      const auto dataset = data::Dataset::open(data_dir, data_options);
      val_tokens = std::shared_ptr<const data::TokenStream>(dataset, &dataset->split(data::Split::val));
      eos_id = dataset->eos_id();
      vocab = dataset->vocab_size();
      where = data_dir.string();
      loader = std::make_unique<data::Loader>(dataset, loader_config);
    }
    if (vocab > c.model.vocab) {
      throw std::invalid_argument(c.source + ": model.vocab: the data in " + where + " has " + std::to_string(vocab) +
                                  " token ids; expected model.vocab >= that, got " + std::to_string(c.model.vocab));
    }
    val = std::make_unique<data::ValidationIterator>(val_tokens, eos_id, where, c.train.seq_len, c.train.batch_seqs,
                                                     grid.dp_rank(), grid.dp_size(), c.train.eval_batches,
                                                     c.data.document_masking, c.train.micro_batch_seqs);
  });
  errors.agree("opening the data");

  // Model, optimizer, schedule.
  std::unique_ptr<Model> model;
  std::unique_ptr<DistributedOptimizer> optimizer;
  const auto build_model = [&] {
    const TensorParallel tp = TensorParallel::over(grid.comm(GridAxis::tp, placement.device));
    model = std::make_unique<Model>(c.model, DType::f32, true, tp, placement.device, placement.compute);
    model->init_parameters(c.train.seed);
    optimizer = std::make_unique<DistributedOptimizer>(c.optim, model->params(), dp_params, zero, tp);
    if (dp_params.device() == Device::cuda) {  // the DP all-reduce overlaps backward (on the CPU it follows it)
      model->set_gradients_ready(
          [opt = optimizer.get()](size_t first, size_t end) { opt->gradients_ready(first, end); });
    }
  };
  errors.run(build_model);
  errors.agree("building the model");
  const LrSchedule schedule(c.optim, c.train.steps);

  // Resume.
  TrainSummary summary;
  summary.device = std::string(device_name(placement.device));
  summary.precision = std::string(dtype_name(placement.compute));
  int64_t tokens = 0;
  if (c.train.resume != ResumeMode::never) {
    const ResumeAttempt attempt = resume_training(checkpoint_root, world, *optimizer, *loader, out);
    const std::optional<ResumedTraining>& resumed = attempt.resumed;
    if (resumed) {
      model->params().refresh_compute_values();
      summary.start_step = resumed->step;
      tokens = resumed->tokens;
      if (resumed->config != c.resolved) {
        out << "warning: the configuration differs from the one " << resumed->directory.string()
            << " was written with\n";
      }
      out << "resumed from " << resumed->directory.string() << " (step " << resumed->step << ", "
          << human_count(double(tokens)) << " tokens, written as tp " << resumed->layout.tp << " × dp "
          << resumed->layout.dp << ")\n";
    } else if (c.train.resume == ResumeMode::require) {
      throw_alike<std::runtime_error>(
          world, checkpoint_root.string() + ": train.resume = \"require\" but there is no committed checkpoint");
    } else if (attempt.state_overwritten) {
      errors.run(build_model);  // a damaged checkpoint was partly read: start afresh
      errors.agree("building the model");
    }
  }
  std::optional<MetricsLog> metrics;
  errors.run([&] {
    if (!lead) return;
    data::write_file_atomically(run_dir / "config.toml", c.resolved);
    metrics.emplace(run_dir / "metrics.jsonl", summary.start_step);
  });
  errors.agree("starting the run");
  AsyncCheckpointWriter writer(checkpoint_root, static_cast<int>(c.train.keep_checkpoints), &world);

  ParameterSet& params = model->params();
  const int64_t last_step = c.last_step();
  const int64_t micro_steps = loader->micro_steps_per_step();
  const int64_t tokens_per_step = c.train.batch_seqs * c.train.seq_len;
  const CheckpointLayout layout{grid.tp_size(), grid.dp_size(), grid.world_size()};
  out << "run " << run_dir.string() << ": " << human_count(double(params.numel()))
      << (grid.tp_size() > 1 ? " parameters per TP rank (" : " parameters (") << mixer_kind_name(c.model.mixer) << ", "
      << c.model.layers << " layers), " << grid.world_size()
      << (grid.world_size() == 1 ? " rank"
                                 : " ranks = tp " + std::to_string(grid.tp_size()) + " × dp " +
                                       std::to_string(grid.dp_size()) + (zero ? " (ZeRO-1)" : ""))
      << ", " << (placement.device == Device::cuda ? "cuda:" + std::to_string(grid.cuda_device()) : "cpu") << " "
      << dtype_name(placement.compute) << (placement.compute == DType::f32 ? "" : " (f32 master weights)") << ", "
      << omp_get_max_threads() << " threads" << (grid.world_size() > 1 ? " per rank" : "") << ", data "
      << loader->describe() << ", " << tokens_per_step << " tokens/step, steps " << summary.start_step << " → "
      << last_step << " of " << c.train.steps << "; set up in " << human_duration(seconds_since(setup_start)) << "\n";
  summary.end_step = summary.start_step;
  summary.tokens = tokens;
  if (summary.start_step >= c.train.steps) {
    out << "the run is already complete (step " << summary.start_step << ")\n";
    summary.complete = true;
    return summary;
  }

  auto save = [&](int64_t step) {
    const auto t0 = Clock::now();
    writer.save(training_checkpoint_part(c, step, tokens, *optimizer, *loader, layout));
    summary.checkpoint_blocked_ms = std::max(summary.checkpoint_blocked_ms, 1e3 * seconds_since(t0));
  };

  // Progress for a coordinator that launched this job (rank 0 reports; nullptr otherwise): a job that
  // falls silent is taken for a hung one.
  std::unique_ptr<coordinator::HeartbeatClient> heartbeats =
      lead ? coordinator::HeartbeatClient::from_env(grid.world_size()) : nullptr;
  int64_t committed_step = summary.start_step > 0 ? summary.start_step : -1;

  ProgressLine progress(out, last_step);
  const auto run_start = Clock::now();
  double step_seconds_avg = 0;
  for (int64_t step = summary.start_step + 1; step <= last_step; ++step) {
    const auto step_start = Clock::now();
    const double lr = schedule.at(step - 1);
    double local_loss = 0;
    errors.run([&] {
      params.zero_grads();
      for (int64_t m = 0; m < micro_steps; ++m) {
        data::TokenBatch batch = loader->next();
        const auto n = static_cast<int64_t>(batch.inputs.size());
        if (m + 1 == micro_steps && dp_params.device() == Device::cuda) optimizer->overlap_next_backward();
        local_loss += model->forward_backward(Tensor::view(batch.inputs.data(), {n}, DType::i32),
                                              Tensor::view(batch.targets.data(), {n}, DType::i32), batch.layout,
                                              1.0 / static_cast<double>(micro_steps)) /
                      static_cast<double>(micro_steps);
      }
    });
    errors.agree("step " + std::to_string(step));
    const double loss = group_mean(dp, local_loss);
    const double norm = optimizer->reduce_gradients();
    if (std::isfinite(loss) && std::isfinite(norm)) {  // the same verdict on every rank
      optimizer->step(lr);
      params.refresh_compute_values();
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
      double local_val_loss = 0;
      errors.run([&] { local_val_loss = evaluate(*model, *val); });
      errors.agree("evaluating at step " + std::to_string(step));
      summary.last_val_loss = group_mean(dp, local_val_loss);
      line["val_loss"] = summary.last_val_loss;
    }
    errors.run([&] {
      if (lead) {
        if (eval_step || step % c.train.log_every == 0 || step == last_step) metrics->append(line);
        progress.update(step, last_step, loss, double(tokens_per_step) / step_seconds, step_seconds_avg);
        if (eval_step) {
          progress.finish_line();
          out << "step " << step << ": val_loss " << std::fixed << std::setprecision(4) << summary.last_val_loss
              << "\n";
        }
      }
      if (options.on_step) options.on_step(line);
    });
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

    summary.stop_signal = agreed_stop_signal(world);
    const bool checkpoint_step =
        c.train.checkpoint_every >= 0 && ((c.train.checkpoint_every > 0 && step % c.train.checkpoint_every == 0) ||
                                          step == last_step || summary.stop_signal != 0);
    if (checkpoint_step) save(step);
    writer.poll();
    if (summary.stop_signal != 0) {
      progress.finish_line();
      out << "stopping at step " << step << " on signal " << summary.stop_signal << "\n";
      break;
    }
  }
  errors.agree("after step " + std::to_string(summary.end_step));
  progress.finish_line();
  writer.wait();
  if (auto error = writer.last_error()) throw_alike<std::runtime_error>(world, "checkpoint write failed: " + *error);
  summary.checkpoint_write_ms = writer.last_stats().write_ms;
  summary.checkpoint_bytes = writer.last_stats().bytes;
  summary.seconds = seconds_since(run_start);
  const int64_t steps_done = summary.end_step - summary.start_step;
  summary.tokens_per_s = summary.seconds > 0 ? double(steps_done * tokens_per_step) / summary.seconds : 0;
  summary.complete = summary.end_step >= c.train.steps;
  summary.peak_device_bytes = static_cast<int64_t>(cuda_peak_allocated_bytes());
  return summary;
}

}  // namespace linea

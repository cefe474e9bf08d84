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
#include <vector>

#include "checkpoint/async_checkpoint_writer.h"
#include "checkpoint/checkpoint_directory.h"
#include "coordinator/client.h"
#include "data/atomic_file.h"
#include "data/dataset.h"
#include "data/default_corpus.h"
#include "data/document_source.h"
#include "data/loader.h"
#include "data/mqar_batches.h"
#include "data/prepare.h"
#include "data/streaming_loader.h"
#include "inference/hf_checkpoint.h"
#include "kernels/device_memory.h"
#include "model/model.h"
#include "parallel/error_agreement.h"
#include "parallel/mpi_comm.h"
#include "parallel/mpi_error.h"
#include "parallel/process_grid.h"
#include "worker/config_difference.h"
#include "worker/distributed_optimizer.h"
#include "worker/lr_schedule.h"
#include "worker/metrics_log.h"
#include "worker/placement.h"
#include "worker/run_directory_lock.h"
#include "worker/stop_signal.h"
#include "worker/target_accuracy.h"
#include "worker/thread_count.h"
#include "worker/training_checkpoint.h"
#include "worker/training_evaluation.h"

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
double evaluate(Model& model, data::ValidationBatches& val) {
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

// One run of train(), phase by phase: the constructor sets up the ranks (grid, device, threads);
// then open_data, build_model, resume, start (config.toml, metrics, the run line), the steps, and
// finish. Each phase that can fail on one rank ends with every rank agreeing on its errors.
class TrainingRun {
 public:
  TrainingRun(const RunConfig& c, std::ostream& log, const TrainOptions& options)
      : c_(c),
        options_(options),
        setup_start_(Clock::now()),
        grid_(make_grid(c, options.world)),
        lead_(grid_.world_rank() == 0),
        out_(lead_ ? log : quiet_),
        world_(grid_.comm(GridAxis::world)),
        dp_(grid_.comm(GridAxis::dp)),
        placement_(training_placement(c)),  // the same verdict on every rank
        run_dir_(fs::path(c.dir) / c.name),
        checkpoint_root_(run_dir_ / "checkpoints"),
        errors_(world_) {
    check_same_config(world_, c);
    if (placement_.device == Device::cuda) grid_.enable_cuda();  // GPU local_rank; NCCL communicators
    // Gradients and weights move over the communicators of the device they live on.
    dp_params_ = &grid_.comm(GridAxis::dp, placement_.device);
    const ThreadChoice threads = choose_threads(this_process_thread_facts(c.train.threads, grid_.local_size()));
    omp_set_num_threads(threads.count);
    out_ << threads.note;
    zero_ = c.optim.zero.value_or(grid_.dp_size() > 1);
  }

  // The data: rank 0 takes the run directory's lock (before any rank writes there; a refusal
  // reaches every rank) and builds the default corpus on first use while the others wait; a
  // parquet stream is read by every rank.
  void open_data() {
    const bool streaming = !c_.data.parquet_glob().empty();
    const bool mqar = data::is_mqar_path(c_.data.path);
    errors_.run([&] {
      if (!lead_) return;
      make_run_directory();
      lock_.emplace(run_dir_);
      if (!streaming && !mqar) data_dir_ = data_directory(c_);
    });
    errors_.agree("preparing the run");
    errors_.run([&] {
      // Each DP replica takes its share of every global batch; the TP ranks of a replica the same one.
      if (c_.train.batch_seqs % (grid_.dp_size() * c_.train.micro_batch_seqs) != 0) {
        throw std::invalid_argument(
            c_.source + ": train.batch_seqs = " + std::to_string(c_.train.batch_seqs) +
            " must be a multiple of dp × train.micro_batch_seqs = " + std::to_string(grid_.dp_size()) + " × " +
            std::to_string(c_.train.micro_batch_seqs) +
            " (every data-parallel replica takes an equal share of each global batch)");
      }
      data::LoaderConfig loader_config;
      loader_config.seq_len = c_.train.seq_len;
      loader_config.global_batch_seqs = c_.train.batch_seqs;
      loader_config.micro_batch_seqs = c_.train.micro_batch_seqs;
      loader_config.rank = grid_.dp_rank();
      loader_config.world = grid_.dp_size();
      loader_config.seed = c_.train.seed;
      loader_config.document_masking = c_.data.document_masking;
      std::shared_ptr<const data::TokenStream> val_tokens;
      int32_t eos_id = -1;
      int64_t vocab = 0;
      std::string where;
      if (!c_.eval.tasks.empty()) {
        if (mqar)
          throw std::invalid_argument(
              c_.source + ": eval.tasks: an MQAR run has no tokenizer to evaluate with (its val_acc is MQAR accuracy)");
        if (grid_.tp_size() > 1) {
          throw std::invalid_argument(c_.source +
                                      ": eval.tasks: evaluation during training needs the whole model on "
                                      "rank 0 (parallel.tp = 1), this run has tp = " +
                                      std::to_string(grid_.tp_size()) +
                                      "; run `linea eval --device cuda` on its checkpoints instead");
        }
      }
      if (mqar) {  // synthetic: generated by every rank from the seed; val from a separate stream
        const data::MqarConfig task = data::parse_mqar_path(c_.data.path, c_.train.seq_len, c_.source);
        loader_ = std::make_unique<data::MqarBatches>(task, loader_config);
        val_ = std::make_unique<data::MqarValidation>(task, loader_config, c_.train.eval_batches);
        vocab = task.vocab;
        where = c_.data.path;
      } else if (streaming) {
        auto stream = std::make_unique<data::StreamingLoader>(streaming_config(c_, loader_config));
        val_tokens = stream->val_stream();
        eos_id = stream->eos_id();
        vocab = stream->vocab_size();
        where = c_.data.path;
        if (lead_ && !c_.eval.tasks.empty())
          eval_tokenizer_ = data::TokenizerChoice::parse(c_.data.tokenizer, "").load();
        loader_ = std::move(stream);
      } else {
        if (!lead_) data_dir_ = data_directory(c_);
        data::DatasetOptions data_options;
        data_options.vocab_size = c_.data.vocab_size;
        data_options.eos_id = static_cast<int32_t>(c_.data.eos_id);
        data_options.verify_checksums = c_.data.verify_checksums;
        const auto dataset = data::Dataset::open(data_dir_, data_options);
        val_tokens = std::shared_ptr<const data::TokenStream>(dataset, &dataset->split(data::Split::val));
        eos_id = dataset->eos_id();
        vocab = dataset->vocab_size();
        where = data_dir_.string();
        if (lead_ && !c_.eval.tasks.empty()) eval_tokenizer_ = dataset->tokenizer();
        loader_ = std::make_unique<data::Loader>(dataset, loader_config);
      }
      if (vocab > c_.model.vocab) {
        throw std::invalid_argument(c_.source + ": model.vocab: the data in " + where + " has " +
                                    std::to_string(vocab) + " token ids; expected model.vocab >= that, got " +
                                    std::to_string(c_.model.vocab));
      }
      if (!mqar)
        val_ = std::make_unique<data::ValidationIterator>(
            val_tokens, eos_id, where, c_.train.seq_len, c_.train.batch_seqs, grid_.dp_rank(), grid_.dp_size(),
            c_.train.eval_batches, c_.data.document_masking, c_.train.micro_batch_seqs);
    });
    errors_.agree("opening the data");
  }

  // Model and optimizer (the parameters initialised from the seed), and the learning-rate schedule.
  void build_model() {
    make_model();
    schedule_.emplace(c_.optim, c_.train.steps);
  }

  // The newest committed checkpoint that verifies, unless train.resume = "never"; the damaged
  // ones skipped on the way are set aside unless the run stops here (resume = "require" finding
  // none).
  void resume() {
    summary_.device = std::string(device_name(placement_.device));
    summary_.precision = std::string(dtype_name(placement_.compute));
    if (c_.train.resume == ResumeMode::never) return;
    const ResumeAttempt attempt =
        resume_training(checkpoint_root_, world_, *optimizer_, *loader_, out_, c_.model.routing.resume_unrouted);
    const std::optional<ResumedTraining>& resumed = attempt.resumed;
    if (!resumed && c_.train.resume == ResumeMode::require) {
      throw_alike<std::runtime_error>(
          world_, checkpoint_root_.string() + ": train.resume = \"require\" but " +
                      (attempt.damaged.empty()
                           ? std::string("there is no committed checkpoint")
                           : "every committed checkpoint is damaged (" + std::to_string(attempt.damaged.size()) + ": " +
                                 listed(attempt.damaged) + "; see the warnings above)"));
    }
    set_aside_damaged(attempt.damaged);
    if (resumed) {
      model_->params().refresh_compute_values();
      summary_.start_step = resumed->step;
      tokens_ = resumed->tokens;
      if (resumed->config != c_.resolved) {
        out_ << "warning: the configuration differs from the one " << resumed->directory.string()
             << " was written with:";
        for (const std::string& d : config_differences(resumed->config, c_.resolved)) out_ << "\n  " << d;
        out_ << "\n";
      }
      if (attempt.unrouted) {
        out_ << "model.routing.resume_unrouted: " << resumed->directory.string()
             << " has no routing parameters; they start at their initial values (the routed terms zero)\n";
      }
      out_ << "resumed from " << resumed->directory.string() << " (step " << resumed->step << ", "
           << human_count(double(tokens_)) << " tokens, written as tp " << resumed->layout.tp << " × dp "
           << resumed->layout.dp << ")\n";
    } else {
      if (attempt.state_overwritten) make_model();  // a damaged checkpoint was partly read: start afresh
      restarting_after_damage_ = !attempt.damaged.empty();
      if (restarting_after_damage_) {
        out_ << "warning: every committed checkpoint is damaged (" << listed(attempt.damaged)
             << "): training starts again from step 0\n";
      }
    }
  }

  // config.toml, metrics.jsonl, the checkpoint writer and the run line; false when the run is
  // already complete.
  bool start() {
    errors_.run([&] {
      if (!lead_) return;
      data::write_file_atomically(run_dir_ / "config.toml", c_.resolved);
      if (restarting_after_damage_) keep_old_metrics_aside();
      metrics_.emplace(run_dir_ / "metrics.jsonl", summary_.start_step);
    });
    errors_.agree("starting the run");
    writer_.emplace(checkpoint_root_, static_cast<int>(c_.train.keep_checkpoints), &world_);
    last_step_ = c_.last_step();
    tokens_per_step_ = c_.train.batch_seqs * c_.train.seq_len;
    out_ << "run " << run_dir_.string() << ": " << human_count(double(model_->params().numel()))
         << (grid_.tp_size() > 1 ? " parameters per TP rank (" : " parameters (") << c_.model.mixers_description()
         << ", " << c_.model.layers << " layers), " << grid_.world_size()
         << (grid_.world_size() == 1 ? " rank"
                                     : " ranks = tp " + std::to_string(grid_.tp_size()) + " × dp " +
                                           std::to_string(grid_.dp_size()) + (zero_ ? " (ZeRO-1)" : ""))
         << ", " << (placement_.device == Device::cuda ? "cuda:" + std::to_string(grid_.cuda_device()) : "cpu") << " "
         << dtype_name(placement_.compute) << (placement_.compute == DType::f32 ? "" : " (f32 master weights)") << ", "
         << omp_get_max_threads() << " threads" << (grid_.world_size() > 1 ? " per rank" : "") << ", "
         << loader_->describe() << ", " << tokens_per_step_ << " tokens/step, steps " << summary_.start_step << " → "
         << last_step_ << " of " << c_.train.steps << "; set up in " << human_duration(seconds_since(setup_start_))
         << "\n";
    summary_.end_step = summary_.start_step;
    summary_.tokens = tokens_;
    if (summary_.start_step >= c_.train.steps) {
      out_ << "the run is already complete (step " << summary_.start_step << ")\n";
      summary_.complete = true;
      return false;
    }
    // Progress for a coordinator that launched this job (rank 0 reports; nullptr otherwise): a job
    // that falls silent is taken for a hung one.
    heartbeats_ = lead_ ? coordinator::HeartbeatClient::from_env(grid_.world_size()) : nullptr;
    committed_step_ = summary_.start_step > 0 ? summary_.start_step : -1;
    return true;
  }

  // Steps start_step + 1 … last_step, or until a stop signal.
  void train_steps() {
    ProgressLine progress(out_, last_step_);
    run_start_ = Clock::now();
    double step_seconds_avg = 0;
    for (int64_t step = summary_.start_step + 1; step <= last_step_; ++step) {
      const auto step_start = Clock::now();
      const double lr = schedule_->at(step - 1);
      const double loss = group_mean(dp_, forward_backward(step));
      const double norm = optimizer_->reduce_gradients();
      if (std::isfinite(loss) && std::isfinite(norm)) {  // the same verdict on every rank
        optimizer_->step(lr);
        model_->params().refresh_compute_values();
      } else {
        progress.finish_line();
        out_ << "warning: step " << step << ": non-finite loss " << loss << " or gradient norm " << norm
             << ": update skipped\n";
      }
      tokens_ += tokens_per_step_;
      const double step_seconds = seconds_since(step_start);
      step_seconds_avg = step == summary_.start_step + 1 ? step_seconds : 0.9 * step_seconds_avg + 0.1 * step_seconds;
      summary_.end_step = step;
      summary_.tokens = tokens_;
      summary_.last_loss = loss;
      report(step, lr, loss, norm, step_seconds, step_seconds_avg, progress);
      if (checkpoint_or_stop(step, progress)) break;
    }
    errors_.agree("after step " + std::to_string(summary_.end_step));
    progress.finish_line();
  }

  // Waits for the last checkpoint and fills in the summary. When that write failed the run is not
  // complete (its last step is not committed): it stops with an error, and a coordinator hears why
  // first, in one more heartbeat (the last step's went out before the write ended), so that it can
  // name the reason of the exit as it does for failures during training.
  TrainSummary finish() {
    writer_->wait();
    if (const std::optional<std::string> failure = take_checkpoint_outcomes()) {
      if (heartbeats_) {
        last_beat_.checkpoint_step = committed_step_;
        last_beat_.checkpoint_error = *failure;
        heartbeats_->heartbeat(last_beat_);
      }
      throw_alike<std::runtime_error>(world_, checkpoint_root_.string() + ": " + *failure + newest_committed_note());
    }
    summary_.checkpoint_write_ms = writer_->last_stats().write_ms;
    summary_.checkpoint_bytes = writer_->last_stats().bytes;
    summary_.seconds = seconds_since(run_start_);
    const int64_t steps_done = summary_.end_step - summary_.start_step;
    summary_.tokens_per_s = summary_.seconds > 0 ? double(steps_done * tokens_per_step_) / summary_.seconds : 0;
    summary_.complete = summary_.end_step >= c_.train.steps;
    summary_.peak_device_bytes = static_cast<int64_t>(cuda_peak_allocated_bytes());
    return summary_;
  }

  const TrainSummary& summary() const { return summary_; }

 private:
  // run.dir/run.name, created (rank 0), or an error naming the key.
  void make_run_directory() {
    std::error_code ec;
    fs::create_directories(run_dir_, ec);
    if (ec || !fs::is_directory(run_dir_)) {
      throw std::runtime_error(c_.source + ": run.dir = \"" + c_.dir + "\": cannot create the run directory " +
                               run_dir_.string() + ": " + (ec ? ec.message() : "a file of that name is in the way") +
                               " (expected a directory linea can write, or a path where one can be made)");
    }
    if (::access(run_dir_.c_str(), W_OK) != 0) {
      throw std::runtime_error(c_.source + ": run.dir = \"" + c_.dir + "\": the run directory " + run_dir_.string() +
                               " is not writable");
    }
  }

  // A fresh start over a run whose checkpoints are all damaged replaces metrics.jsonl: the old
  // one is kept as metrics.jsonl.before-restart[-N] (the first free name), and the log says so.
  void keep_old_metrics_aside() {
    const fs::path metrics = run_dir_ / "metrics.jsonl";
    if (!fs::exists(metrics) || fs::file_size(metrics) == 0) return;
    fs::path aside = run_dir_ / "metrics.jsonl.before-restart";
    for (int n = 2; fs::exists(aside); ++n) aside = run_dir_ / ("metrics.jsonl.before-restart-" + std::to_string(n));
    fs::rename(metrics, aside);
    out_ << "the old metrics.jsonl is kept as " << aside.string() << "\n";
  }

  // The committed checkpoints the resume skipped as damaged, renamed to step-N.damaged by rank 0
  // (checkpoint_directory.h; a failure is an error on every rank). Training goes on from an older
  // one (or from step 0) and metrics.jsonl is cut back to that step, so no later resume may take
  // one of them up again should it read well by then (the same byte flipped back, a read that
  // failed once): it would keep the lines logged so far and leave the steps up to its own missing.
  void set_aside_damaged(const std::vector<fs::path>& damaged) {
    if (damaged.empty()) return;  // the same list on every rank
    errors_.run([&] {
      if (!lead_) return;
      for (const fs::path& d : damaged) {
        out_ << "the damaged checkpoint " << d.string() << " is set aside as "
             << set_aside_damaged_checkpoint(d).string() << "\n";
      }
    });
    errors_.agree("setting the damaged checkpoints aside");
  }

  static std::string listed(const std::vector<fs::path>& paths) {
    std::string text;
    for (const fs::path& p : paths) text += (text.empty() ? "" : ", ") + p.filename().string();
    return text;
  }

  void make_model() {
    errors_.run([&] {
      const TensorParallel tp = TensorParallel::over(grid_.comm(GridAxis::tp, placement_.device));
      model_ = std::make_unique<Model>(c_.model, DType::f32, true, tp, placement_.device, placement_.compute);
      model_->init_parameters(c_.train.seed);
      if (!c_.model.init_from.empty()) {  // "hf:DIR" (checked by ModelConfig::parse)
        if (tp.size > 1) throw std::invalid_argument(c_.source + ": model.init_from: not yet under tensor parallelism");
        inference::import_hf(*model_, c_.model.init_from.substr(3));
      }
      optimizer_ = std::make_unique<DistributedOptimizer>(c_.optim, model_->params(), *dp_params_, zero_, tp);
      if (dp_params_->device() == Device::cuda) {  // the DP all-reduce overlaps backward (on the CPU it follows it)
        model_->set_gradients_ready(
            [opt = optimizer_.get()](size_t first, size_t end) { opt->gradients_ready(first, end); });
      }
    });
    errors_.agree("building the model");
  }

  // This rank's loss of step `step`: forward and backward over its micro-batches, the gradients
  // accumulated (and, on a GPU, the DP all-reduce of the last one started during its backward).
  double forward_backward(int64_t step) {
    const int64_t micro_steps = loader_->micro_steps_per_step();
    double local_loss = 0;
    errors_.run([&] {
      model_->params().zero_grads();
      for (int64_t m = 0; m < micro_steps; ++m) {
        data::TokenBatch batch = loader_->next();
        const auto n = static_cast<int64_t>(batch.inputs.size());
        if (m + 1 == micro_steps && dp_params_->device() == Device::cuda) optimizer_->overlap_next_backward();
        local_loss += model_->forward_backward(Tensor::view(batch.inputs.data(), {n}, DType::i32),
                                               Tensor::view(batch.targets.data(), {n}, DType::i32), batch.layout,
                                               1.0 / static_cast<double>(micro_steps)) /
                      static_cast<double>(micro_steps);
      }
    });
    errors_.agree("step " + std::to_string(step));
    return local_loss;
  }

  // The checkpoint writes that ended since the last call: the newest committed step, and the
  // failures counted in a row; the newest failure's message, if the newest write failed. The same
  // on every rank (the writer agrees on outcomes).
  std::optional<std::string> take_checkpoint_outcomes() {
    std::optional<std::string> failure;
    for (const CheckpointOutcome& outcome : writer_->take_outcomes()) {
      if (outcome.error) {
        ++checkpoint_failures_in_a_row_;
        failure = "the checkpoint of step " + std::to_string(outcome.step) + " failed: " + *outcome.error;
        last_checkpoint_failure_ = *failure;
      } else {
        checkpoint_failures_in_a_row_ = 0;
        committed_step_ = std::max(committed_step_, outcome.step);
        failure.reset();
      }
    }
    return failure;
  }

  std::string newest_committed_note() const {
    return committed_step_ > 0 ? "; the newest committed checkpoint is step " + std::to_string(committed_step_)
                               : "; no checkpoint is committed yet";
  }

  // The step's metrics line (with the validation loss on evaluation steps, and checkpoint_error
  // when a checkpoint write failed since the last step), the progress line and the coordinator's
  // heartbeat. Throws when more checkpoint writes than train.checkpoint_failures_allowed failed in
  // a row (after reporting the last one).
  void report(int64_t step, double lr, double loss, double norm, double step_seconds, double step_seconds_avg,
              ProgressLine& progress) {
    const std::optional<std::string> checkpoint_failure = take_checkpoint_outcomes();
    const bool too_many_failures = checkpoint_failures_in_a_row_ > c_.train.checkpoint_failures_allowed;
    const bool eval_step = step == c_.train.steps || (c_.train.eval_every > 0 && step % c_.train.eval_every == 0);
    nlohmann::json line = {{"step", step},
                           {"loss", loss},
                           {"lr", lr},
                           {"grad_norm", norm},
                           {"tokens", tokens_},
                           {"tokens_per_s", double(tokens_per_step_) / step_seconds},
                           {"elapsed_s", seconds_since(run_start_)}};
    if (eval_step) {
      double local_val_loss = 0;
      errors_.run([&] { local_val_loss = evaluate(*model_, *val_); });
      errors_.agree("evaluating at step " + std::to_string(step));
      summary_.last_val_loss = group_mean(dp_, local_val_loss);
      line["val_loss"] = summary_.last_val_loss;
      if (data::is_mqar_path(c_.data.path) && grid_.tp_size() == 1) {  // MQAR accuracy at the query positions
        double local_acc = 0;
        errors_.run([&] { local_acc = target_accuracy(*model_, *val_); });
        errors_.agree("MQAR accuracy at step " + std::to_string(step));
        line["val_acc"] = group_mean(dp_, local_acc);  // every rank's share holds the same number of queries
      }
    }
    // The [eval] tasks (rank 0; the others wait at the agreement).
    const bool tasks_due =
        !c_.eval.tasks.empty() && (step == c_.train.steps || (c_.eval.every > 0 && step % c_.eval.every == 0));
    if (tasks_due) {
      errors_.run([&] {
        if (!lead_) return;
        if (!evaluation_) evaluation_.emplace(c_.eval, std::move(eval_tokenizer_), run_dir_);
        progress.finish_line();
        evaluation_->run(*model_, step, line, out_);
      });
      errors_.agree("the [eval] tasks at step " + std::to_string(step));
    }
    if (checkpoint_failure) line["checkpoint_error"] = *checkpoint_failure;
    errors_.run([&] {
      if (lead_) {
        if (eval_step || tasks_due || checkpoint_failure || step % c_.train.log_every == 0 || step == last_step_) {
          metrics_->append(line);
        }
        if (checkpoint_failure) {
          progress.finish_line();
          out_ << "warning: " << *checkpoint_failure << " (" << checkpoint_failures_in_a_row_
               << " in a row; train.checkpoint_failures_allowed = " << c_.train.checkpoint_failures_allowed << ")"
               << newest_committed_note() << "\n";
        }
        progress.update(step, last_step_, loss, double(tokens_per_step_) / step_seconds, step_seconds_avg);
        if (eval_step) {
          progress.finish_line();
          out_ << "step " << step << ": val_loss " << std::fixed << std::setprecision(4) << summary_.last_val_loss;
          if (line.contains("val_acc")) out_ << ", val_acc " << line["val_acc"].get<double>();
          out_ << "\n";
        }
      }
      if (options_.on_step) options_.on_step(line);
    });
    if (heartbeats_) {
      last_beat_ = {};
      last_beat_.step = step;
      last_beat_.loss = loss;
      last_beat_.tokens_per_s = double(tokens_per_step_) / step_seconds;
      if (eval_step) last_beat_.val_loss = summary_.last_val_loss;
      last_beat_.checkpoint_step = committed_step_;
      if (checkpoint_failures_in_a_row_ > 0) last_beat_.checkpoint_error = last_checkpoint_failure_;
      heartbeats_->heartbeat(last_beat_);
    }
    if (too_many_failures) {
      throw_alike<std::runtime_error>(
          world_, checkpoint_root_.string() + ": " + last_checkpoint_failure_ + "; " +
                      std::to_string(checkpoint_failures_in_a_row_) +
                      " checkpoint writes failed in a row, more than train.checkpoint_failures_allowed = " +
                      std::to_string(c_.train.checkpoint_failures_allowed) + ": stopping" + newest_committed_note());
    }
  }

  // A checkpoint on its steps, the last step and a stop signal (which every rank learns of);
  // true when a signal stops the run.
  bool checkpoint_or_stop(int64_t step, ProgressLine& progress) {
    summary_.stop_signal = agreed_stop_signal(world_);
    const bool checkpoint_step =
        c_.train.checkpoint_every >= 0 && ((c_.train.checkpoint_every > 0 && step % c_.train.checkpoint_every == 0) ||
                                           step == last_step_ || summary_.stop_signal != 0);
    if (checkpoint_step) {
      const auto t0 = Clock::now();
      const CheckpointLayout layout{grid_.tp_size(), grid_.dp_size(), grid_.world_size()};
      writer_->save(training_checkpoint_part(c_, step, tokens_, *optimizer_, *loader_, layout));
      summary_.checkpoint_blocked_ms = std::max(summary_.checkpoint_blocked_ms, 1e3 * seconds_since(t0));
    }
    writer_->poll();
    if (summary_.stop_signal == 0) return false;
    progress.finish_line();
    out_ << "stopping at step " << step << " on signal " << summary_.stop_signal << "\n";
    return true;
  }

  const RunConfig& c_;
  const TrainOptions& options_;
  const Clock::time_point setup_start_;
  ProcessGrid grid_;
  const bool lead_;
  std::ostream quiet_{nullptr};
  std::ostream& out_;  // the log on rank 0, nothing elsewhere
  Communicator& world_;
  Communicator& dp_;
  const Placement placement_;
  Communicator* dp_params_ = nullptr;
  bool zero_ = false;
  const fs::path run_dir_, checkpoint_root_;
  PendingErrors errors_;
  std::optional<RunDirectoryLock> lock_;  // rank 0's; released last, after the checkpoint writer

  fs::path data_dir_;
  std::unique_ptr<data::TrainingBatches> loader_;
  std::unique_ptr<data::ValidationBatches> val_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<DistributedOptimizer> optimizer_;
  std::optional<LrSchedule> schedule_;

  TrainSummary summary_;
  int64_t tokens_ = 0;
  int64_t last_step_ = 0, tokens_per_step_ = 0;
  std::optional<MetricsLog> metrics_;
  std::unique_ptr<data::Tokenizer> eval_tokenizer_;  // rank 0, with [eval] tasks, until evaluation_ takes it
  std::optional<TrainingEvaluation> evaluation_;
  std::optional<AsyncCheckpointWriter> writer_;
  std::unique_ptr<coordinator::HeartbeatClient> heartbeats_;
  coordinator::Heartbeat last_beat_;  // the newest heartbeat sent (rank 0 under a coordinator)
  int64_t committed_step_ = -1;
  bool restarting_after_damage_ = false;  // every committed checkpoint was damaged: a fresh start
  int64_t checkpoint_failures_in_a_row_ = 0;
  std::string last_checkpoint_failure_;  // the newest failed write's message (while failures are in a row)
  Clock::time_point run_start_;
};

}  // namespace

TrainSummary train(const RunConfig& c, std::ostream& log, const TrainOptions& options) {
  TrainingRun run(c, log, options);
  run.open_data();
  run.build_model();
  run.resume();
  if (!run.start()) return run.summary();
  run.train_steps();
  return run.finish();
}

}  // namespace linea

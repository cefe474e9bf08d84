// RunConfig: everything `linea train` reads from a run's TOML file (plus command-line overrides).
//
//   device = "auto"            # auto | cpu | cuda
//   [run]    name, dir         # the run writes into dir/name/
//   [model]  …                 # model/model_config.h
//   [optimizer] kind, lr, beta1, beta2, eps, weight_decay, decay_embeddings, muon_momentum, ns_steps,
//               grad_clip, schedule, warmup_steps, lr_min_ratio, wsd_decay_ratio, zero
//   [train]  steps, stop_at, batch_seqs, micro_batch_seqs, seq_len, seed, log_every, eval_every,
//            eval_batches, checkpoint_every, keep_checkpoints, checkpoint_failures_allowed, resume, threads,
//            precision ("auto" = bf16 on cuda, f32 on the cpu | "bf16" (cuda only) | "f32")
//   [data]   path ("default" = the embedded corpus; a shard directory; "parquet:GLOB" = parquet
//            files tokenized as they stream in), vocab_size/eos_id (plain llm.c shard directories
//            only), verify_checksums, document_masking; for parquet streams: tokenizer (as
//            `linea prepare --tokenizer`), val_docs, text_field, where, threads
//   [parallel] tp, dp (tp × dp = the number of ranks; dp = 0: ranks / tp), timeout_s, validate
//
// Unknown keys, wrong types and values out of range fail here, before any work, with the file and
// the dotted key in the message.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "worker/optimizer_config.h"

namespace linea {

enum class ResumeMode { auto_resume, never, require };

struct TrainConfig {
  int64_t steps = 1000;          // the schedule's length
  int64_t stop_at = 0;           // checkpoint and exit after this step (0: run to `steps`)
  int64_t batch_seqs = 8;        // sequences per optimizer step (all ranks)
  int64_t micro_batch_seqs = 0;  // sequences per forward/backward (0: batch_seqs)
  int64_t seq_len = 256;
  uint64_t seed = 1;               // parameters' init and the data order
  int64_t log_every = 1;           // metrics.jsonl line every N steps
  int64_t eval_every = 100;        // 0: only at the end
  int64_t eval_batches = 8;        // global batches of the val split per evaluation (0: all), in micro-batches
  int64_t checkpoint_every = 100;  // 0: only at stop_at / the end / a signal; -1: never (benchmarks)
  int64_t keep_checkpoints = 3;
  // Failed checkpoint writes in a row that training goes on after (each is reported); one more
  // stops the run with an error, the committed checkpoints kept.
  int64_t checkpoint_failures_allowed = 1;
  ResumeMode resume = ResumeMode::auto_resume;
  int64_t threads = 0;  // OpenMP threads (0: every core)
  // Of activations and compute weights (master weights and gradients are f32 either way):
  // "auto" (bf16 on cuda, f32 on the cpu), "bf16" (cuda only) or "f32".
  std::string precision = "auto";
};

struct DataConfig {
  std::string path = "default";
  int64_t vocab_size = 0;
  int64_t eos_id = -1;
  bool verify_checksums = true;
  bool document_masking = true;  // a sequence starts at every EOS (false: one per row)
  // data.path = "parquet:GLOB" (data/streaming_loader.h):
  std::string tokenizer;            // spm:MODEL, gpt2:DIR, hf:PATH/tokenizer.json, tiktoken:PATH[:VARIANT]
  int64_t val_docs = 0;             // the first val_docs documents are the val split (≥ 1)
  std::string text_field = "text";  // the parquet column
  std::string where;                // row filter, as `linea prepare --where`
  int64_t threads = 2;              // tokenizer threads (and row groups decoded at once)

  // The GLOB of a "parquet:GLOB" path; empty for other paths (parse_data refuses "parquet:" alone).
  std::string parquet_glob() const { return path.rfind("parquet:", 0) == 0 ? path.substr(8) : std::string(); }
};

struct ParallelConfig {
  int64_t tp = 1;          // tensor-parallel ranks per group
  int64_t dp = 0;          // data-parallel replicas (0: the number of ranks / tp)
  double timeout_s = 600;  // longest wait for the other ranks in one collective (0: no limit)
  bool validate = false;   // compare every collective call across ranks first (debugging)
};

// [eval]: evaluation tasks (eval/evaluation.h) run during training, on rank 0 (tp = 1), on the
// device it trains on, every `every` steps and after the last step; their results go to
// metrics.jsonl and the run's eval.jsonl (worker/training_evaluation.h).
struct EvalConfig {
  std::vector<std::string> tasks;  // empty: none
  int64_t every = 0;               // steps between evaluations (0: after the last step only)
  int64_t limit = 0;               // items per data set / samples per synthetic task (0: all, 100)
  std::string data_dir = "data/eval";
  std::vector<int64_t> context_lengths = {4096};
  int64_t seed = 42;
};

struct RunConfig {
  std::string source;  // the config file
  std::string name = "default";
  std::string dir = "runs";
  std::string device = "auto";
  ModelConfig model;
  OptimizerConfig optim;
  TrainConfig train;
  DataConfig data;
  ParallelConfig parallel;
  EvalConfig eval;
  std::string resolved;  // every key with the value used, as TOML: written to the run directory

  int64_t last_step() const { return train.stop_at > 0 ? std::min(train.stop_at, train.steps) : train.steps; }
};

// Throws std::invalid_argument naming the file and key on any problem.
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides);
RunConfig parse_run_config(std::string_view text, const std::string& source, const std::vector<std::string>& overrides);

}  // namespace linea

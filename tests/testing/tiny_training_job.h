// The job the fault tests train with the real `linea train`: a tiny 2-layer GDN/attention hybrid
// (d_model 32, Muon) on synthetic shards (synthetic_shards.h), one thread per rank, a committed
// checkpoint every 5 steps, run.name "faulty". A few hundred steps take seconds under mpirun -np 2.
#pragma once
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/testing/json_lines.h"
#include "tests/testing/synthetic_shards.h"

namespace linea::testing {

// Writes DIR/data (the shards) and DIR/run.toml (train.steps = `steps`); returns the config's path.
// The run goes to RUN_DIR/faulty with the overrides of tiny_job_overrides().
inline std::filesystem::path write_tiny_training_job(const std::filesystem::path& dir, int64_t steps) {
  make_synthetic_data(dir / "data");
  const std::filesystem::path config = dir / "run.toml";
  std::ofstream(config) << R"(device = "cpu"
[run]
name = "faulty"
[model]
d_model = 32
layers = 2
vocab = 64
mixer = "gdn"
hybrid = "1:1"
[model.linear]
heads = 2
d_k = 16
d_v = 16
[model.attention]
heads = 2
head_dim = 16
[optimizer]
kind = "muon"
lr = 1e-2
warmup_steps = 3
[train]
steps = )" << steps << R"(
batch_seqs = 8
micro_batch_seqs = 2
seq_len = 32
eval_every = 0
checkpoint_every = 5
keep_checkpoints = 100
threads = 1
[data]
vocab_size = 64
eos_id = 0
)";
  return config;
}

// The overrides that put a tiny job's run into RUN_DIR/faulty, reading the data written beside its
// config, followed by `more`.
inline std::vector<std::string> tiny_job_overrides(const std::filesystem::path& dir,
                                                   const std::filesystem::path& run_dir,
                                                   std::vector<std::string> more = {}) {
  more.push_back("run.dir=" + run_dir.string());
  more.push_back("data.path=" + (dir / "data").string());
  return more;
}

// The lines of RUN_DIR/faulty/metrics.jsonl.
inline std::vector<nlohmann::json> tiny_job_metrics(const std::filesystem::path& run_dir) {
  return json_lines(run_dir / "faulty" / "metrics.jsonl");
}

}  // namespace linea::testing

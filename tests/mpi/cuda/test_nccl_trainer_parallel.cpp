// `linea train` on GPUs under mpirun, one GPU per rank (skipped, on every rank alike, when the node
// has fewer GPUs than ranks): a GDN / softmax-attention hybrid with Muon, f32 compute, synthetic
// shards, 10 steps.
// - Every TP × DP layout of the ranks (1×N, 2×N/2, …, N×1) follows the one-GPU loss, gradient norm
//   and val loss trajectory within 5e-3 relative (the layouts sum in other orders, and Muon's bf16
//   Newton–Schulz carries such differences forward; the largest difference is printed);
// - a run stopped at step 5 under TP = 2 (its checkpoint holds the GPU shards) resumes under 1×N
//   and follows the uninterrupted TP = 2 run within the same bound.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/runtime.h"
#include "parallel/mpi_comm.h"
#include "tests/mpi/shared_directory.h"
#include "tests/testing/json_lines.h"
#include "tests/testing/synthetic_shards.h"
#include "worker/run_config.h"
#include "worker/trainer.h"

namespace linea {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Sizes the CUDA kernels support (d_k 32, attention head_dim 64); the vocabulary (65) splits
// unevenly over 2 and 4 ranks, the heads evenly.
std::string gpu_hybrid_config() {
  return R"(device = "cuda"
[run]
name = "hybrid"
[model]
d_model = 64
layers = 2
vocab = 65
mixer = "gdn"
hybrid = "1:1"
tie_embeddings = false
[model.linear]
heads = 4
d_k = 32
d_v = 32
[model.attention]
heads = 4
head_dim = 64
[optimizer]
kind = "muon"
lr = 1e-2
warmup_steps = 3
[train]
precision = "f32"
steps = 10
batch_seqs = 8
micro_batch_seqs = 2
seq_len = 64
eval_every = 5
eval_batches = 2
checkpoint_every = 5
keep_checkpoints = 5
threads = 1
[data]
vocab_size = 64
eos_id = 0
[parallel]
timeout_s = 60
validate = true
)";
}

constexpr double kTolerance = 5e-3;

class NcclTrainerParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    rank_ = comm_rank(MPI_COMM_WORLD);
    size_ = comm_size(MPI_COMM_WORLD);
    const int devices = cuda::device_count();
    if (devices < size_) GTEST_SKIP() << size_ << " ranks need a GPU each; " << devices << " visible";
    if (rank_ == 0) testing::make_synthetic_data(root_.path() / "data");
    MPI_Barrier(MPI_COMM_WORLD);
  }

  RunConfig config(const std::string& run_dir, std::vector<std::string> overrides = {}) {
    overrides.push_back("run.dir=" + (root_.path() / run_dir).string());
    overrides.push_back("data.path=" + (root_.path() / "data").string());
    return parse_run_config(gpu_hybrid_config(), "hybrid.toml", overrides);
  }

  // Trains on the ranks of `comm` (every rank of it calls).
  void run(MPI_Comm comm, const RunConfig& c) {
    std::ostringstream log;
    TrainOptions options;
    options.world = comm;
    train(c, log, options);
  }

  // The one-GPU run, trained by rank 0 alone (on GPU 0).
  void run_alone(const RunConfig& c) {
    if (rank_ == 0) run(MPI_COMM_SELF, c);
    MPI_Barrier(MPI_COMM_WORLD);
  }

  // Loss, gradient norm and val loss step by step within kTolerance (checked on rank 0, which
  // writes the metrics).
  void expect_same_trajectory(const std::string& a, const std::string& b) {
    if (rank_ != 0) return;
    SCOPED_TRACE(a + " vs " + b);
    const auto x = testing::json_lines(root_.path() / a / "hybrid" / "metrics.jsonl");
    const auto y = testing::json_lines(root_.path() / b / "hybrid" / "metrics.jsonl");
    ASSERT_EQ(x.size(), y.size());
    ASSERT_FALSE(x.empty());
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(x[i]["step"], y[i]["step"]);
      for (const char* key : {"loss", "grad_norm", "val_loss"}) {
        ASSERT_EQ(x[i].contains(key), y[i].contains(key)) << key;
        if (!x[i].contains(key)) continue;
        const double u = x[i][key].get<double>(), v = y[i][key].get<double>();
        worst = std::max(worst, std::abs(u - v) / std::abs(v));
        EXPECT_NEAR(u, v, kTolerance * std::abs(v)) << key << " at step " << x[i]["step"];
      }
    }
    std::printf("measured %s vs %s: largest relative difference %.3g over %zu steps\n", a.c_str(), b.c_str(), worst,
                x.size());
  }

  void copy_run(const std::string& from, const std::string& to) {
    if (rank_ == 0) fs::copy(root_.path() / from, root_.path() / to, fs::copy_options::recursive);
    MPI_Barrier(MPI_COMM_WORLD);
  }

  testing::SharedDirectory root_;
  int rank_ = 0, size_ = 1;
};

TEST_F(NcclTrainerParallel, EveryLayoutFollowsOneGpu) {
  run_alone(config("one"));
  for (int tp = 1; tp <= size_; tp *= 2) {  // tp × dp = size_
    const std::string name = "tp" + std::to_string(tp);
    run(MPI_COMM_WORLD, config(name, {"parallel.tp=" + std::to_string(tp)}));
    expect_same_trajectory(name, "one");
  }
}

TEST_F(NcclTrainerParallel, StoppedUnderTensorParallelismResumesUnderDataParallelism) {
  run(MPI_COMM_WORLD, config("whole", {"parallel.tp=2"}));
  run(MPI_COMM_WORLD, config("stopped", {"parallel.tp=2", "train.stop_at=5"}));
  copy_run("stopped", "as_dp");
  run(MPI_COMM_WORLD, config("as_dp", {"parallel.tp=1"}));
  expect_same_trajectory("as_dp", "whole");
}

}  // namespace
}  // namespace linea

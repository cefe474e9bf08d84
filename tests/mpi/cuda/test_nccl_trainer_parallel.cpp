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

#include <cstdio>
#include <string>

#include "kernels/cuda/runtime.h"
#include "parallel/mpi_comm.h"
#include "tests/mpi/trainer_runs.h"

namespace linea {
namespace {

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

class NcclTrainerParallel : public testing::TrainerRuns {
 protected:
  NcclTrainerParallel() : TrainerRuns(gpu_hybrid_config(), "hybrid") {}

  void SetUp() override {
    const int ranks = comm_size(MPI_COMM_WORLD), devices = cuda::device_count();
    if (devices < ranks) GTEST_SKIP() << ranks << " ranks need a GPU each; " << devices << " visible";
    TrainerRuns::SetUp();
  }

  // The largest relative difference is printed: the bound is an estimate of bf16 Newton–Schulz drift.
  void expect_same_trajectory(const std::string& a, const std::string& b) {
    const double worst = TrainerRuns::expect_same_trajectory(a, b, kTolerance);
    if (rank_ == 0) std::printf("measured %s vs %s: largest relative difference %.3g\n", a.c_str(), b.c_str(), worst);
  }
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

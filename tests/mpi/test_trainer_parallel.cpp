// `linea train` under mpirun (2 and 4 ranks) on a tiny GDN / softmax-attention hybrid with Muon and
// synthetic shards:
// - every TP × DP layout of the ranks (1×2, 2×1; 1×4, 2×2, 4×1, and 1×2, 2×1 on half of 4 ranks),
//   with and without ZeRO, follows the one-rank loss trajectory over 20 steps on the same global
//   batches, to fp32 rounding; ZeRO on and off give the same bits;
// - a run stopped under tp = 2 (2×1, or 2×2 with 4 ranks) resumes under 1×N, 1×1 (and 4×1, 1×2)
//   and continues as the uninterrupted run did, to fp32 rounding; under its own layout, bit for bit;
// - a layout that does not fit the ranks, a global batch the DP replicas cannot share, and an error
//   on one rank in the middle of training are the same clear error on every rank (AgreedError), not
//   a hang. (A rank that stops or dies: tests/fault/test_train_faults.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "parallel/error_agreement.h"
#include "parallel/mpi_comm.h"
#include "tests/mpi/trainer_runs.h"

namespace linea {
namespace {

using nlohmann::json;

std::string hybrid_config() {
  return R"(device = "cpu"
[run]
name = "hybrid"
[model]
d_model = 16
layers = 2
vocab = 64
mixer = "gdn"
hybrid = "1:1"
tie_embeddings = false
[model.linear]
heads = 4
d_k = 8
d_v = 8
[model.attention]
heads = 4
head_dim = 8
[optimizer]
kind = "muon"
lr = 1e-2
warmup_steps = 3
[train]
steps = 20
batch_seqs = 8
micro_batch_seqs = 2
seq_len = 32
eval_every = 10
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

class TrainerParallel : public testing::TrainerRuns {
 protected:
  TrainerParallel() : TrainerRuns(hybrid_config(), "hybrid") {}

  void expect_bit_identical(const std::string& a, const std::string& b) {
    if (rank_ != 0) return;
    const auto x = metrics(a), y = metrics(b);
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i) {
      for (const char* key : {"step", "loss", "grad_norm", "val_loss", "lr", "tokens"}) {
        EXPECT_EQ(x[i].value(key, json()), y[i].value(key, json())) << key << " at line " << i;
      }
    }
  }
};

// fp32 rounding: the DP replicas accumulate their micro-batches and the reduction sums them in
// another order than one rank, and 20 steps of Muon carry such differences forward.
constexpr double kTolerance = 2e-4;

TEST_F(TrainerParallel, EveryLayoutFollowsOneRank) {
  run_alone(config("one"));
  for (int tp = 1; tp <= size_; tp *= 2) {  // tp × dp = size_
    const std::string name = "tp" + std::to_string(tp);
    run(MPI_COMM_WORLD, config(name, {"parallel.tp=" + std::to_string(tp)}));
    expect_same_trajectory(name, "one", kTolerance);
  }
  run(MPI_COMM_WORLD, config("tp1_plain", {"optimizer.zero=false"}));
  expect_bit_identical("tp1_plain", "tp1");  // ZeRO on and off: the same bits
  if (size_ == 4) {                          // two jobs side by side, each on half of the ranks: 1 × 2 and 2 × 1
    const MpiComm half = MpiComm::split(MPI_COMM_WORLD, rank_ / 2, 0, "half");
    run(half.get(), config(rank_ < 2 ? "half_dp" : "half_tp", {rank_ < 2 ? "parallel.tp=1" : "parallel.tp=2"}));
    MPI_Barrier(MPI_COMM_WORLD);
    expect_same_trajectory("half_dp", "one", kTolerance);
    expect_same_trajectory("half_tp", "one", kTolerance);
  }
  if (rank_ == 0) {
    const auto lines = metrics("tp2");
    ASSERT_EQ(lines.size(), 20u);
    EXPECT_LT(lines.back()["loss"].get<double>(), lines.front()["loss"].get<double>() - 0.5);
  }
}

TEST_F(TrainerParallel, StoppedUnderOneLayoutResumesUnderAnother) {
  const std::string saved_tp = "parallel.tp=2";  // 2 × 1, or 2 × 2 with 4 ranks
  run(MPI_COMM_WORLD, config("whole", {saved_tp}));
  run(MPI_COMM_WORLD, config("stopped", {saved_tp, "train.stop_at=10"}));
  if (rank_ == 0) {
    const CheckpointState saved = load_checkpoint(root_.path() / "stopped/hybrid/checkpoints" / "step-000000010");
    EXPECT_EQ(saved.layout, (CheckpointLayout{2, size_ / 2, size_}));
  }
  for (const char* copy : {"as_same", "as_dp", "as_one", "as_tp4", "as_half"}) copy_run("stopped", copy);
  // Under its own layout: bit for bit.
  run(MPI_COMM_WORLD, config("as_same", {saved_tp}));
  expect_bit_identical("as_same", "whole");
  // As 1 × N and as one rank: the first 10 steps are the saved run's, the rest follows it to fp32
  // rounding.
  run(MPI_COMM_WORLD, config("as_dp", {"parallel.tp=1"}));
  expect_same_trajectory("as_dp", "whole", kTolerance);
  run_alone(config("as_one"));
  expect_same_trajectory("as_one", "whole", kTolerance);
  if (size_ == 4) {  // 2 × 2 → 4 × 1, and → 1 × 2 on half of the ranks
    run(MPI_COMM_WORLD, config("as_tp4", {"parallel.tp=4"}));
    expect_same_trajectory("as_tp4", "whole", kTolerance);
    const MpiComm half = MpiComm::split(MPI_COMM_WORLD, rank_ / 2, 0, "half");
    if (rank_ < 2) run(half.get(), config("as_half", {"parallel.tp=1"}));
    MPI_Barrier(MPI_COMM_WORLD);
    expect_same_trajectory("as_half", "whole", kTolerance);
  }
}

// Every rank catches the same error: a layout that does not fit, and one rank failing mid-run.
TEST_F(TrainerParallel, ErrorsAreTheSameOnEveryRank) {
  const auto error_on_every_rank = [&](const std::function<void()>& f) {
    std::string message;
    try {
      f();
      ADD_FAILURE() << "no error";
    } catch (const AgreedError& e) {
      message = e.what();
    }
    // The same text on every rank.
    std::vector<int> lengths(static_cast<size_t>(size_));
    int length = static_cast<int>(message.size());
    MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD);
    for (int l : lengths) EXPECT_EQ(l, length);
    return message;
  };
  std::string message = error_on_every_rank([&] { run(MPI_COMM_WORLD, config("bad", {"parallel.dp=3"})); });
  EXPECT_NE(message.find("parallel.tp = 1, parallel.dp = 3"), std::string::npos) << message;
  EXPECT_NE(message.find("needs 3 ranks but the world has " + std::to_string(size_)), std::string::npos) << message;

  message = error_on_every_rank([&] { run(MPI_COMM_WORLD, config("bad", {"train.micro_batch_seqs=8"})); });
  EXPECT_NE(message.find("train.batch_seqs = 8 must be a multiple of dp × train.micro_batch_seqs = " +
                         std::to_string(size_) + " × 8"),
            std::string::npos)
      << message;

  message = error_on_every_rank([&] {
    run(MPI_COMM_WORLD, config("failing"), [&](const json& line) {
      if (rank_ == size_ - 1 && line["step"] == 3) throw std::runtime_error("injected failure at step 3");
    });
  });
  EXPECT_NE(message.find("step 4: rank " + std::to_string(size_ - 1) + ": injected failure at step 3"),
            std::string::npos)
      << message;
  // Nothing was committed (the first checkpoint was due at step 5).
  if (rank_ == 0) {
    EXPECT_TRUE(list_committed_checkpoints(root_.path() / "failing/hybrid/checkpoints").empty());
  }
}

}  // namespace
}  // namespace linea

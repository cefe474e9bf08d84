// Fault tests of `linea train` as users run it: the real binary under `mpirun -np 2`, with one rank
// broken from outside while the job trains (synthetic shards, a tiny model):
// - a rank that stops answering (SIGSTOP): the other times out after parallel.timeout_s, says so,
//   and ends the whole job (MPI_Abort): the job exits with an error instead of hanging;
// - a rank that is killed (SIGKILL): mpirun ends the job; started again, the run resumes from its
//   last committed checkpoint and continues exactly (bit for bit) as a run that was never killed.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_directory.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tiny_training_job.h"
#include "tests/testing/train_job.h"

namespace linea {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

using Job = testing::TrainJob;

class TrainFaults : public ::testing::Test {
 protected:
  void SetUp() override { config_ = testing::write_tiny_training_job(tmp_.path(), 100000); }

  std::vector<std::string> overrides(const std::string& dir, std::vector<std::string> more = {}) {
    return testing::tiny_job_overrides(tmp_.path(), tmp_.path() / dir, std::move(more));
  }

  std::vector<json> metrics(const std::string& dir) { return testing::tiny_job_metrics(tmp_.path() / dir); }

  testing::TempDir tmp_;
  fs::path config_;
};

TEST_F(TrainFaults, AStoppedRankEndsTheJobWithATimeoutNotAHang) {
  Job job(config_, overrides("stall", {"parallel.timeout_s=2"}), tmp_.path() / "stall.log");
  ASSERT_TRUE(testing::eventually([&] { return metrics("stall").size() >= 3; }, 120s)) << job.output();
  const pid_t rank1 = job.rank_pid(1);
  ASSERT_GT(rank1, 0);
  kill(rank1, SIGSTOP);
  const int status = job.wait(120s);
  kill(rank1, SIGKILL);  // in case mpirun left it stopped
  EXPECT_NE(status, 0);
  const std::string log = job.output();
  EXPECT_NE(log.find("linea train (rank 0 of 2): error: communicator"), std::string::npos) << log;
  EXPECT_NE(log.find("not complete after 2000 ms"), std::string::npos) << log;
  EXPECT_NE(log.find("linea train (rank 0 of 2): ending the whole job"), std::string::npos) << log;
}

TEST_F(TrainFaults, AKilledRankEndsTheJobAndTheRunResumesExactly) {
  const fs::path checkpoints = tmp_.path() / "killed" / "faulty" / "checkpoints";
  int64_t committed = 0;
  {
    Job job(config_, overrides("killed"), tmp_.path() / "killed.log");
    ASSERT_TRUE(testing::eventually([&] { return !list_committed_checkpoints(checkpoints).empty(); }, 120s))
        << job.output();
    const pid_t rank1 = job.rank_pid(1);
    ASSERT_GT(rank1, 0);
    kill(rank1, SIGKILL);
    EXPECT_NE(job.wait(120s), 0);
    committed = list_committed_checkpoints(checkpoints).back().step;
  }
  // Started again: it resumes from the newest committed checkpoint and runs 10 more steps.
  const std::string stop = "train.stop_at=" + std::to_string(committed + 10);
  Job resumed(config_, overrides("killed", {stop}), tmp_.path() / "resumed.log");
  ASSERT_EQ(resumed.wait(120s), 0) << resumed.output();
  EXPECT_NE(resumed.output().find("resumed from " + (checkpoints / checkpoint_directory_name(committed)).string()),
            std::string::npos)
      << resumed.output();
  Job whole(config_, overrides("whole", {stop}), tmp_.path() / "whole.log");
  ASSERT_EQ(whole.wait(120s), 0) << whole.output();

  const auto a = metrics("killed"), b = metrics("whole");
  ASSERT_EQ(a.size(), static_cast<size_t>(committed + 10));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    for (const char* key : {"step", "loss", "grad_norm", "lr", "tokens"}) {
      EXPECT_EQ(a[i][key], b[i][key]) << key << " at step " << i + 1;
    }
  }
}

}  // namespace
}  // namespace linea

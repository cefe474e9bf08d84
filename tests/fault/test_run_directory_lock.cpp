// One writer per run directory: while `linea train` (2 ranks) trains in RUN_DIR, a second
// `linea train` in the same directory, alone or under mpirun, is refused with an error naming the
// holder's pid and host, and changes nothing there: the first run's config.toml and metrics.jsonl
// stay its own. (A run killed outright releases the lock with its process, so the same command
// resumes it: test_train_faults' AKilledRankEndsTheJobAndTheRunResumesExactly.)
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

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
using namespace std::chrono_literals;

TEST(RunDirectoryLock, ASecondRunInTheSameDirectoryIsRefusedAndChangesNothing) {
  testing::TempDir tmp;
  const fs::path config = testing::write_tiny_training_job(tmp.path(), 100000);
  const fs::path run_dir = tmp.path() / "shared";
  testing::TrainJob first(config, testing::tiny_job_overrides(tmp.path(), run_dir), tmp.path() / "first.log");
  ASSERT_TRUE(testing::eventually([&] { return testing::tiny_job_metrics(run_dir).size() >= 3; }, 120s))
      << first.output();
  const pid_t holder = first.rank_pid(0);
  ASSERT_GT(holder, 0);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string holder_named = "pid " + std::to_string(holder) + " host " + host;
  const std::string first_config = testing::read_whole_file(run_dir / "faulty" / "config.toml");

  const auto changed = testing::tiny_job_overrides(tmp.path(), run_dir, {"optimizer.lr=1e-4"});
  testing::TrainJob alone(config, changed, tmp.path() / "alone.log", 0);
  EXPECT_EQ(alone.wait(60s), 1) << alone.output();
  EXPECT_NE(alone.output().find("is in use by another linea train (" + holder_named), std::string::npos)
      << alone.output();
  testing::TrainJob two_ranks(config, changed, tmp.path() / "two_ranks.log");
  EXPECT_NE(two_ranks.wait(60s), 0) << two_ranks.output();
  EXPECT_NE(two_ranks.output().find("linea train (rank 1 of 2): error: preparing the run: rank 0: " + run_dir.string() +
                                    "/faulty is in use"),
            std::string::npos)
      << two_ranks.output();

  // The first run stops on SIGTERM with a checkpoint; its records are its own, step after step.
  for (int rank : {0, 1}) kill(first.rank_pid(rank), SIGTERM);
  EXPECT_NE(first.wait(120s), -1);
  EXPECT_EQ(testing::read_whole_file(run_dir / "faulty" / "config.toml"), first_config);
  const auto lines = testing::tiny_job_metrics(run_dir);
  const auto committed = list_committed_checkpoints(run_dir / "faulty" / "checkpoints");
  ASSERT_FALSE(committed.empty());
  ASSERT_EQ(static_cast<int64_t>(lines.size()), committed.back().step) << first.output();
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(lines[i]["step"], static_cast<int64_t>(i + 1));
}

}  // namespace
}  // namespace linea

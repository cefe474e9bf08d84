// A disk that fills under a training job (2 ranks; its checkpoints directory is a 1 MB tmpfs):
// each failed checkpoint write is reported on the progress line and in metrics.jsonl
// (checkpoint_error), and once more writes than train.checkpoint_failures_allowed failed in a row
// the job stops with an error naming the reason and exit status 1; every checkpoint committed
// before stays and loads.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_directory.h"
#include "tests/testing/small_file_system.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tiny_training_job.h"
#include "tests/testing/train_job.h"

namespace linea {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST(CheckpointFailures, AFullDiskIsReportedAndStopsTheRunKeepingWhatWasCommitted) {
  testing::TempDir tmp;
  const fs::path config = testing::write_tiny_training_job(tmp.path(), 100000);
  const fs::path run_dir = tmp.path() / "full";
  const fs::path checkpoints = run_dir / "faulty" / "checkpoints";
  testing::SmallFileSystem disk(checkpoints, 1 << 20);
  if (!disk.mounted()) GTEST_SKIP() << "needs a small file system: " << disk.why_not();

  testing::TrainJob job(config, testing::tiny_job_overrides(tmp.path(), run_dir), tmp.path() / "full.log");
  ASSERT_EQ(job.wait(120s), 1) << job.output();
  const std::string log = job.output();
  EXPECT_NE(log.find("warning: the checkpoint of step "), std::string::npos) << log;
  EXPECT_NE(log.find("(1 in a row; train.checkpoint_failures_allowed = 1)"), std::string::npos) << log;
  EXPECT_NE(log.find("No space left on device"), std::string::npos) << log;
  EXPECT_NE(log.find("linea train (rank 1 of 2): error: " + checkpoints.string() + ": the checkpoint of step "),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("2 checkpoint writes failed in a row, more than train.checkpoint_failures_allowed = 1: stopping"),
            std::string::npos)
      << log;

  // metrics.jsonl: consecutive steps; the two failures, each on the line of the step that found it.
  const auto lines = testing::tiny_job_metrics(run_dir);
  std::vector<int64_t> failure_steps;
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["step"], static_cast<int64_t>(i + 1));
    if (lines[i].contains("checkpoint_error")) failure_steps.push_back(lines[i]["step"]);
  }
  ASSERT_EQ(failure_steps.size(), 2u) << log;
  EXPECT_EQ(failure_steps.back(), static_cast<int64_t>(lines.size()));  // it stopped on the second

  // What was committed before the disk filled is still there and loads.
  const auto committed = list_committed_checkpoints(checkpoints);
  ASSERT_FALSE(committed.empty()) << log;
  for (const CommittedCheckpoint& c : committed) EXPECT_NO_THROW(load_checkpoint(c.directory)) << c.directory;
  EXPECT_NE(log.find("the newest committed checkpoint is step " + std::to_string(committed.back().step)),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace linea

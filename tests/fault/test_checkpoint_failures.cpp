// Full disks under training jobs (2 ranks; their checkpoints directory is a small tmpfs):
// - one that fills during training: each failed checkpoint write is reported on the progress line
//   and in metrics.jsonl (checkpoint_error), and once more writes than
//   train.checkpoint_failures_allowed failed in a row the job stops with an error naming the reason
//   and exit status 1; every checkpoint committed before stays and loads;
// - one found full by the last checkpoint of a run under a coordinator (the disk filled once step
//   35 of 40 was committed): the attempt trains every step but cannot commit its last, so it fails,
//   and the coordinator names the reason as it does for failures during training; once there is
//   room the relaunch resumes from step 35 and completes, its metrics.jsonl that of the run never
//   broken and its checkpoints directory nothing but committed checkpoints that load.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_directory.h"
#include "tests/testing/child_process.h"
#include "tests/testing/coordinator_process.h"
#include "tests/testing/small_file_system.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tiny_training_job.h"
#include "tests/testing/train_job.h"

namespace linea {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
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

TEST(CheckpointFailures, AFullDiskAtTheLastCheckpointIsNamedAndTheRelaunchFinishesTheRun) {
  constexpr int64_t kSteps = 40, kFilledAfter = 35;
  testing::TempDir tmp;
  const fs::path config = testing::write_tiny_training_job(tmp.path(), kSteps);
  const fs::path run_root = tmp.path() / "runs" / "full";
  const fs::path run_dir = run_root / "faulty";
  const fs::path checkpoints = run_dir / "checkpoints";
  testing::SmallFileSystem disk(checkpoints, 8 << 20);
  if (!disk.mounted()) GTEST_SKIP() << "needs a small file system: " << disk.why_not();
  testing::TrainJob reference(config, testing::tiny_job_overrides(tmp.path(), tmp.path() / "reference"),
                              tmp.path() / "reference.log");

  // Steps 1 … 35 with room (train.stop_at checkpoints step 35 and exits); then the disk is full.
  const std::vector<std::string> overrides =
      testing::tiny_job_overrides(tmp.path(), run_root, {"train.keep_checkpoints=3"});
  std::vector<std::string> until = overrides;
  until.push_back("train.stop_at=" + std::to_string(kFilledAfter));
  testing::TrainJob first(config, until, tmp.path() / "first.log");
  ASSERT_EQ(first.wait(120s), 0) << first.output();
  ASSERT_EQ(list_committed_checkpoints(checkpoints).back().step, kFilledAfter);
  disk.fill();
  // Its config.toml says stop_at = 35, which the coordinator would take for a run already finished
  // (it is written again by the job the coordinator launches).
  fs::remove(run_dir / "config.toml");

  testing::CoordinatorProcess coordinator(LINEA_BINARY, tmp.path() / "state",
                                          {"--slots", "1", "--heartbeat-timeout", "30", "--startup-timeout", "120",
                                           "--backoff", "0", "--max-restarts", "10"});
  coordinator.request({{"type", "submit"},
                       {"runs", json::array({{{"name", "full"},
                                              {"config", config.string()},
                                              {"overrides", overrides},
                                              {"run_dir", run_dir.string()},
                                              {"processes", 2}}})}});
  coordinator.wait_for(
      "full", [](const json& s) { return s["attempt"] != 0 || s["state"] != "running"; }, 120s,
      "ended by the full disk");
  disk.make_room();
  const json end = coordinator.wait_for_end("full", 120s);
  EXPECT_EQ(end["state"], "completed") << end.dump();

  // Attempt 0 resumed from step 35, trained to 40 and could not commit it: the coordinator says why.
  std::string exit_detail;
  for (const json& e : coordinator.journal()) {
    if (e.value("event", "") == "exit" && e.value("attempt", -1) == 0) exit_detail = e.value("detail", "");
  }
  EXPECT_NE(exit_detail.find("exited with status 1; its last checkpoint failed: the checkpoint of step " +
                             std::to_string(kSteps) + " failed: "),
            std::string::npos)
      << exit_detail << "\ncoordinator log:\n"
      << coordinator.log();
  EXPECT_NE(exit_detail.find("No space left on device"), std::string::npos) << exit_detail;
  const std::string attempt0 = testing::read_whole_file(run_dir / "logs" / "attempt-000.log");
  EXPECT_NE(attempt0.find("(step " + std::to_string(kFilledAfter) + ","), std::string::npos) << attempt0;
  EXPECT_NE(attempt0.find(checkpoints.string() + ": the checkpoint of step " + std::to_string(kSteps) + " failed: "),
            std::string::npos)
      << attempt0;
  EXPECT_NE(attempt0.find("the newest committed checkpoint is step " + std::to_string(kFilledAfter)), std::string::npos)
      << attempt0;

  // The attempt that completed resumed from step 35 too; the run reads as never broken.
  char last_log[32];
  std::snprintf(last_log, sizeof last_log, "attempt-%03lld.log", static_cast<long long>(end["attempt"].get<int64_t>()));
  const std::string last = testing::read_whole_file(run_dir / "logs" / last_log);
  EXPECT_NE(last.find("resumed from " + (checkpoints / checkpoint_directory_name(kFilledAfter)).string()),
            std::string::npos)
      << last;
  ASSERT_EQ(reference.wait(120s), 0) << reference.output();
  const std::vector<json> want = testing::tiny_job_metrics(tmp.path() / "reference");
  const std::vector<json> got = testing::tiny_job_metrics(run_root);
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    for (const char* key : {"step", "loss", "grad_norm", "lr", "tokens"}) {
      EXPECT_EQ(got[i][key], want[i][key]) << key << " at step " << i + 1;
    }
  }

  // Nothing half-written is left: the newest three checkpoints, committed, and nothing else.
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(checkpoints)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{checkpoint_directory_name(30), checkpoint_directory_name(35),
                                             checkpoint_directory_name(40)}));
  for (const CommittedCheckpoint& c : list_committed_checkpoints(checkpoints))
    EXPECT_NO_THROW(load_checkpoint(c.directory)) << c.directory;
}

}  // namespace
}  // namespace linea

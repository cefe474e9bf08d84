// Supervision with the fake worker (tests/helpers/coordinator_fake_worker.cpp) on loopback: a job
// killed by SIGKILL, or stopped by SIGSTOP (a hang: its heartbeats stop), is torn down and relaunched,
// resumes from its last checkpoint and finishes with the same losses as a clean run; restarts,
// lost/productive time and the death → first-heartbeat recovery time are accounted. Also: the
// restart budget, the reason of a job stopped by failed checkpoints, the startup timeout, slots,
// cancel, launch failures, and that a run whose
// metrics say it finished is not launched again.
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <cstdio>

#include "coordinator/metrics_log.h"
#include "coordinator/run_directory.h"
#include "tests/testing/coordinator_harness.h"

namespace linea::testing {
namespace {

using namespace std::chrono_literals;

double fake_loss(int64_t step) { return 2.0 + 8.0 * std::exp(-static_cast<double>(step) / 20.0); }

// From the fake worker's raw metrics lines: the time from attempt 0's last logged step (it died right
// after) to attempt 1's first logged step (its first heartbeat follows at once): death → training again.
double death_to_training_again_s(const TempDir& dir, const std::string& run) {
  std::ifstream in(dir / ("runs/" + run + "/metrics.jsonl"));
  double last_of_first = 0, first_of_second = 0;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (!j.contains("time")) continue;
    if (j["attempt"] == 0) last_of_first = j["time"];
    if (j["attempt"] == 1 && first_of_second == 0) first_of_second = j["time"];
  }
  return first_of_second - last_of_first;
}

// The metrics a resumed run leaves: every step once, each with the clean run's loss.
void expect_clean_metrics(const TempDir& dir, const std::string& run, int64_t steps) {
  const coordinator::MetricsLog log = coordinator::read_metrics_log(dir / ("runs/" + run + "/metrics.jsonl"));
  EXPECT_TRUE(log.finished);
  ASSERT_EQ(log.points.size(), static_cast<size_t>(steps));
  for (int64_t s = 0; s < steps; ++s) {
    EXPECT_EQ(log.points[s].step, s);
    EXPECT_NEAR(log.points[s].loss, fake_loss(s), 1e-4);
  }
}

TEST(Supervision, KilledJobIsRelaunchedAndResumes) {
  TempDir dir;
  CoordinatorThread server(test_options(dir));
  server.request(
      {{"type", "submit"},
       {"runs", {fake_run(dir, "crash", {"fake.steps=30", "fake.checkpoint_every=5", "fake.crash_at=12"})}}});
  const nlohmann::json s = wait_for_end(server, "crash", 20s);
  EXPECT_EQ(s["state"], "completed");
  EXPECT_EQ(s["attempt"], 1);
  const nlohmann::json& a = s["accounting"];
  EXPECT_EQ(a["restarts"], 1);
  EXPECT_NE(s["last_error"].get<std::string>().find("signal 9"), std::string::npos) << s["last_error"];
  ASSERT_EQ(a["recovery_s"].size(), 1u);
  const double recovery = a["recovery_s"][0];
  EXPECT_GT(recovery, 0);
  EXPECT_LT(recovery, 2.0);
  // Lost: steps 10..12 after the checkpoint at 9, and the recovery gap.
  EXPECT_GT(a["lost_s"].get<double>(), recovery);
  EXPECT_GT(a["productive_s"].get<double>(), 0.4);  // 30 steps of 20 ms were kept
  EXPECT_LT(s["goodput"].get<double>(), 1.0);
  EXPECT_NEAR(s["wall_s"].get<double>(), a["productive_s"].get<double>() + a["lost_s"].get<double>(), 1e-6);
  EXPECT_EQ(completions(dir, "crash"), 1);
  expect_clean_metrics(dir, "crash", 30);
  EXPECT_TRUE(std::filesystem::exists(dir / "runs/crash/logs/attempt-000.log"));
  EXPECT_TRUE(std::filesystem::exists(dir / "runs/crash/logs/attempt-001.log"));
  EXPECT_TRUE(std::filesystem::exists(dir / "runs/crash/coordinator.json"));
  std::printf(
      "[ measured ] SIGKILL: detected -> relaunched job's first heartbeat %.3f s; death -> training again "
      "%.3f s (goodput %.1f%%)\n",
      recovery, death_to_training_again_s(dir, "crash"), 100 * s["goodput"].get<double>());
  RecordProperty("sigkill_recovery_ms", static_cast<int>(recovery * 1000));
}

TEST(Supervision, HungJobIsTornDownAndRelaunched) {
  TempDir dir;
  CoordinatorThread server(test_options(dir));  // heartbeat timeout 0.5 s
  server.request({{"type", "submit"},
                  {"runs", {fake_run(dir, "hang", {"fake.steps=30", "fake.checkpoint_every=5", "fake.hang_at=12"})}}});
  int64_t first_pid = 0;
  ASSERT_TRUE(wait_until(
      [&] {
        const nlohmann::json s = server.run_status("hang");
        first_pid = s["attempt"] == 0 ? s["pid"].get<int64_t>() : 0;
        return first_pid > 0;
      },
      5s));
  const nlohmann::json s = wait_for_end(server, "hang", 20s);
  EXPECT_EQ(s["state"], "completed");
  EXPECT_EQ(s["accounting"]["restarts"], 1);
  EXPECT_NE(s["last_error"].get<std::string>().find("no heartbeat for 0.5 s"), std::string::npos) << s["last_error"];
  EXPECT_NE(::kill(static_cast<pid_t>(first_pid), 0), 0) << "the stopped process of attempt 0 is still there";
  ASSERT_EQ(s["accounting"]["recovery_s"].size(), 1u);
  const double recovery = s["accounting"]["recovery_s"][0];
  EXPECT_LT(recovery, 2.0);
  EXPECT_EQ(completions(dir, "hang"), 1);
  expect_clean_metrics(dir, "hang", 30);
  std::printf(
      "[ measured ] SIGSTOP: detected (0.5 s timeout) -> relaunched job's first heartbeat %.3f s; hang -> training "
      "again %.3f s; lost %.3f s, goodput %.1f%%\n",
      recovery, death_to_training_again_s(dir, "hang"), s["accounting"]["lost_s"].get<double>(),
      100 * s["goodput"].get<double>());
  RecordProperty("sigstop_recovery_ms", static_cast<int>(recovery * 1000));
}

// The default launch templates (mpirun for more than one process) with the fake worker as `linea`:
// rank 1 of a 2-rank job kills itself, rank 0 waits in its barrier, mpirun ends the job, and the
// coordinator relaunches it.
TEST(Supervision, MpirunJobWithAKilledRankIsRelaunched) {
  TempDir dir;
  coordinator::CoordinatorOptions options = test_options(dir);
  options.launch = coordinator::LaunchTemplate::defaults();
  options.linea_binary = fake_worker_path();
  options.heartbeat_timeout_s = 5;
  options.startup_timeout_s = 20;
  CoordinatorThread server(options);
  nlohmann::json run = fake_run(dir, "mpi", {"fake.steps=20", "fake.crash_at=8", "fake.fault_rank=1"});
  run["processes"] = 2;
  server.request({{"type", "submit"}, {"runs", {run}}});
  const nlohmann::json s = wait_for_end(server, "mpi", 40s);
  EXPECT_EQ(s["state"], "completed");
  EXPECT_EQ(s["accounting"]["restarts"], 1);
  EXPECT_EQ(completions(dir, "mpi"), 1);
  expect_clean_metrics(dir, "mpi", 20);
  EXPECT_NE(read_text(dir / "runs/mpi/metrics.jsonl").find("\"world_size\": 2"), std::string::npos);
  ASSERT_EQ(s["accounting"]["recovery_s"].size(), 1u);
  std::printf(
      "[ measured ] mpirun -np 2, rank 1 SIGKILL: detected -> relaunched job's first heartbeat %.3f s; "
      "death -> training again %.3f s\n",
      s["accounting"]["recovery_s"][0].get<double>(), death_to_training_again_s(dir, "mpi"));
}

// A job that goes silent after its last step is committed (the CI failure of 2026-12-02: an mpirun job
// slow to exit on a loaded machine) is torn down, but it finished: completed, not relaunched.
TEST(Supervision, JobSilentAfterFinishingIsCompletedNotRestarted) {
  TempDir dir;
  CoordinatorThread server(test_options(dir));  // heartbeat timeout 0.5 s
  server.request(
      {{"type", "submit"}, {"runs", {fake_run(dir, "slow-exit", {"fake.steps=5", "fake.exit_delay_ms=3000"})}}});
  const nlohmann::json s = wait_for_end(server, "slow-exit", 20s);
  EXPECT_EQ(s["state"], "completed");
  EXPECT_EQ(s["accounting"]["restarts"], 0);
  EXPECT_EQ(completions(dir, "slow-exit"), 1);
}

TEST(Supervision, RestartBudgetIsEnforced) {
  TempDir dir;
  coordinator::CoordinatorOptions options = test_options(dir);
  options.max_restarts = 2;
  CoordinatorThread server(options);
  server.request(
      {{"type", "submit"},
       {"runs", {fake_run(dir, "doomed", {"fake.steps=10", "fake.crash_at=1", "fake.fault_attempts=100"})}}});
  const nlohmann::json s = wait_for_end(server, "doomed", 20s);
  EXPECT_EQ(s["state"], "failed");
  EXPECT_EQ(s["attempt"], 2);  // the first launch and two relaunches
  EXPECT_EQ(s["accounting"]["restarts"], 2);
  EXPECT_EQ(completions(dir, "doomed"), 0);
}

TEST(Supervision, AJobStoppedByFailedCheckpointsShowsTheReason) {
  TempDir dir;
  coordinator::CoordinatorOptions options = test_options(dir);
  options.max_restarts = 0;
  CoordinatorThread server(options);
  server.request(
      {{"type", "submit"}, {"runs", {fake_run(dir, "full", {"fake.steps=30", "fake.checkpoint_fail_at=7"})}}});
  const nlohmann::json s = wait_for_end(server, "full", 20s);
  EXPECT_EQ(s["state"], "failed");
  const std::string error = s["last_error"];
  EXPECT_NE(error.find("exited with status 1"), std::string::npos) << error;
  EXPECT_NE(error.find("its last checkpoint failed: the checkpoint of step 7 failed: No space left on device"),
            std::string::npos)
      << error;
}

TEST(Supervision, SilentStartIsTornDownAfterTheStartupTimeout) {
  TempDir dir;
  coordinator::CoordinatorOptions options = test_options(dir);
  options.startup_timeout_s = 0.3;
  options.max_restarts = 0;
  CoordinatorThread server(options);
  server.request({{"type", "submit"}, {"runs", {fake_run(dir, "slow", {"fake.steps=5", "fake.step_ms=3000"})}}});
  const nlohmann::json s = wait_for_end(server, "slow", 10s);
  EXPECT_EQ(s["state"], "failed");
  EXPECT_NE(s["last_error"].get<std::string>().find("no first heartbeat within 0.3 s"), std::string::npos)
      << s["last_error"];
}

TEST(Supervision, SlotsBoundTheJobsRunningAtOnce) {
  TempDir dir;
  coordinator::CoordinatorOptions options = test_options(dir);
  options.slots = 1;
  CoordinatorThread server(options);
  server.request({{"type", "submit"},
                  {"runs", {fake_run(dir, "first", {"fake.steps=5"}), fake_run(dir, "second", {"fake.steps=5"})}}});
  wait_for_end(server, "second", 10s);
  const nlohmann::json first = nlohmann::json::parse(read_text(dir / "runs/first/coordinator.json"));
  const nlohmann::json second = nlohmann::json::parse(read_text(dir / "runs/second/coordinator.json"));
  EXPECT_EQ(first["state"], "completed");
  EXPECT_EQ(second["state"], "completed");
  EXPECT_GE(second["accounting"]["first_launch_at"].get<double>(), first["accounting"]["ended_at"].get<double>());
}

TEST(Supervision, CancelStopsARunningJob) {
  TempDir dir;
  CoordinatorThread server(test_options(dir));
  server.request({{"type", "submit"}, {"runs", {fake_run(dir, "long", {"fake.steps=100000"})}}});
  int64_t pid = 0;
  ASSERT_TRUE(wait_until(
      [&] {
        const nlohmann::json s = server.run_status("long");
        pid = s["pid"].get<int64_t>();
        return s["step"].get<int64_t>() >= 2;
      },
      5s));
  server.request({{"type", "cancel"}, {"runs", {"long"}}});
  EXPECT_EQ(server.run_status("long")["state"], "cancelled");
  EXPECT_TRUE(wait_until([&] { return ::kill(static_cast<pid_t>(pid), 0) != 0; }, 3s)) << "the job still runs";
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(server.run_status("long")["attempt"], 0) << "a cancelled run was relaunched";
  EXPECT_THROW(server.request({{"type", "cancel"}, {"runs", {"long"}}}), std::runtime_error);  // already ended
}

TEST(Supervision, FinishedRunIsNotLaunchedAgain) {
  TempDir dir;
  write_text(dir / "runs/done/metrics.jsonl",
             "{\"step\": 0, \"loss\": 5}\n{\"step\": 1, \"loss\": 4, \"finished\": true}\n");
  CoordinatorThread server(test_options(dir));
  server.request({{"type", "submit"}, {"runs", {fake_run(dir, "done", {"fake.steps=5"})}}});
  const nlohmann::json s = wait_for_end(server, "done", 5s);
  EXPECT_EQ(s["state"], "completed");
  EXPECT_EQ(s["attempt"], -1);
  EXPECT_EQ(completions(dir, "done"), 1);  // the one written before
}

// A run directory as `linea train` leaves it: config.toml, checkpoints/step-N/COMMITTED, no
// "finished" line. Finished means a committed checkpoint at the last step.
TEST(Supervision, TrainerRunDirectoryTellsWhetherItFinished) {
  TempDir dir;
  const std::string run_dir = dir / "runs/trained";
  write_text(run_dir + "/config.toml", "[train]\nsteps = 30\nstop_at = 0\n");
  write_text(run_dir + "/checkpoints/step-000000020/COMMITTED", "");
  write_text(run_dir + "/checkpoints/step-000000030/rank-00000.h5", "");  // not committed: no checkpoint
  write_text(run_dir + "/checkpoints/step-000000030.tmp/COMMITTED", "");  // a temporary directory
  write_text(run_dir + "/metrics.jsonl", "{\"step\": 30, \"loss\": 3}\n");
  EXPECT_EQ(coordinator::newest_committed_checkpoint(run_dir), 20);
  EXPECT_EQ(coordinator::configured_last_step(run_dir), 30);
  EXPECT_FALSE(coordinator::run_finished(run_dir));
  write_text(run_dir + "/config.toml", "[train]\nsteps = 30\nstop_at = 20\n");
  EXPECT_EQ(coordinator::configured_last_step(run_dir), 20);
  EXPECT_TRUE(coordinator::run_finished(run_dir));
  write_text(run_dir + "/config.toml", "[train]\nsteps = 30\nstop_at = 0\n");
  write_text(run_dir + "/checkpoints/step-000000030/COMMITTED", "");
  EXPECT_TRUE(coordinator::run_finished(run_dir));
  write_text(run_dir + "/config.toml", "[train\n");
  EXPECT_THROW(coordinator::run_finished(run_dir), std::runtime_error);
  write_text(run_dir + "/config.toml", "[train]\nsteps = 30\nstop_at = 0\n");

  CoordinatorThread server(test_options(dir));
  server.request({{"type", "submit"}, {"runs", {fake_run(dir, "trained", {"fake.steps=30"})}}});
  const nlohmann::json s = wait_for_end(server, "trained", 5s);
  EXPECT_EQ(s["state"], "completed");
  EXPECT_EQ(s["attempt"], -1) << "a finished run was launched";
}

TEST(Supervision, LaunchFailureFailsTheRunWithTheReason) {
  TempDir dir;
  coordinator::CoordinatorOptions options = test_options(dir);
  options.launch = coordinator::LaunchTemplate::uniform(dir / "no-such-program {config}");
  CoordinatorThread server(options);
  server.request({{"type", "submit"}, {"runs", {fake_run(dir, "nowhere", {})}}});
  const nlohmann::json s = wait_for_end(server, "nowhere", 5s);
  EXPECT_EQ(s["state"], "failed");
  EXPECT_NE(s["last_error"].get<std::string>().find("cannot start"), std::string::npos) << s["last_error"];
}

}  // namespace
}  // namespace linea::testing

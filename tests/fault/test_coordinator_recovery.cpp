// End-to-end supervision with the real trainer: the built `linea coordinator` (loopback, its own
// state directory) runs the tiny job (tests/testing/tiny_training_job.h) as 2-rank jobs, `mpirun -np
// 2 linea train` (dp = 2), and a rank of one of them is broken from outside at a random step:
// - SIGKILL: mpirun ends the job, the coordinator relaunches it, and the relaunched attempt resumes
//   from the newest committed checkpoint;
// - SIGSTOP: rank 0 waits in its collective (parallel.timeout_s = 600 s is far longer than the
//   test), its heartbeats stop, and the coordinator declares the job hung within its heartbeat
//   timeout, tears it down (the stopped rank too) and relaunches it.
// Either way the run completes once, and its metrics.jsonl equals, step by step and bit for bit, that
// of the same run never broken (trained alongside under the same coordinator). The random step
// comes from a seed printed with the result; LINEA_FAULT_SEED=N repeats a case. Each test prints the
// measured times from the fault to detection, relaunch and training again (the relaunched attempt's
// first heartbeat, sent right after it logs its first step).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <string>

#include "checkpoint/checkpoint_directory.h"
#include "coordinator/coordinator.h"
#include "coordinator/job_process.h"
#include "tests/testing/child_process.h"
#include "tests/testing/coordinator_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tiny_training_job.h"

namespace linea {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

constexpr int64_t kSteps = 200;
constexpr double kHeartbeatTimeout_s = 3;  // --heartbeat-timeout below

class CoordinatorRecovery : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::write_tiny_training_job(tmp_.path(), kSteps);
    coordinator_ = std::make_unique<testing::CoordinatorProcess>(
        LINEA_BINARY, tmp_ / "state",
        std::vector<std::string>{"--slots", "2", "--heartbeat-timeout", "3", "--startup-timeout", "120", "--backoff",
                                 "0", "--kill-grace", "1", "--max-restarts", "2"});
    const char* seed_text = std::getenv("LINEA_FAULT_SEED");
    seed_ = seed_text ? std::strtoull(seed_text, nullptr, 10) : std::random_device()();
    std::mt19937_64 rng(seed_);
    // After the first checkpoint (step 5) commits, and early enough that the job is still training.
    fault_step_ = std::uniform_int_distribution<int64_t>(8, kSteps / 2)(rng);
  }

  fs::path run_dir(const std::string& run) const { return tmp_ / "runs" / run / "faulty"; }

  // Queues the two-rank runs `broken` and `clean`: the same job in two directories.
  void submit(const std::string& broken, const std::string& clean) {
    json runs = json::array();
    for (const std::string& run : {broken, clean}) {
      runs.push_back({{"name", run},
                      {"config", config_.string()},
                      {"overrides", testing::tiny_job_overrides(tmp_.path(), tmp_ / "runs" / run)},
                      {"run_dir", run_dir(run).string()},
                      {"processes", 2}});
    }
    coordinator_->request({{"type", "submit"}, {"runs", runs}});
  }

  int64_t logged_steps(const std::string& run) const { return testing::logged_steps(run_dir(run) / "metrics.jsonl"); }

  // Sends `signal` to rank 1 of attempt 0 of `run` once it has logged fault_step_ steps and has a
  // committed checkpoint; returns the unix time of the fault.
  double break_rank_1(const std::string& run, int signal) {
    const pid_t rank1 = testing::job_rank_pid(*coordinator_, run, 0, 1, 60s);
    rank1_ = rank1;
    mpirun_ = static_cast<pid_t>(coordinator_->run_status(run)["pid"].get<int64_t>());
    EXPECT_TRUE(testing::eventually(
        [&] {
          return logged_steps(run) >= fault_step_ && !list_committed_checkpoints(run_dir(run) / "checkpoints").empty();
        },
        60s))
        << "run " << run << " logged " << logged_steps(run) << " steps";
    const double when = coordinator::unix_now();
    ::kill(rank1, signal);
    steps_at_fault_ = logged_steps(run);
    return when;
  }

  // The newest checkpoint of `run` committed before `unix_time` (by the time of its COMMITTED marker).
  int64_t newest_committed_before(const std::string& run, double unix_time) const {
    int64_t newest = -1;
    for (const CommittedCheckpoint& c : list_committed_checkpoints(run_dir(run) / "checkpoints")) {
      const auto written = std::chrono::file_clock::to_sys(fs::last_write_time(c.directory / "COMMITTED"));
      if (std::chrono::duration<double>(written.time_since_epoch()).count() < unix_time) newest = c.step;
    }
    return newest;
  }

  // The run ended once, completed after one relaunch (at unix time `relaunched_at`) that resumed
  // from the newest committed checkpoint (at most step `resume_at_most` when given), with the same
  // metrics (every field that does not measure time) as the clean run.
  void expect_recovered_exactly(const std::string& broken, const std::string& clean, double relaunched_at,
                                std::optional<int64_t> resume_at_most) {
    const json b = coordinator_->wait_for_end(broken, 60s);
    const json c = coordinator_->wait_for_end(clean, 60s);
    EXPECT_EQ(b["state"], "completed") << b.dump();
    EXPECT_EQ(c["state"], "completed") << c.dump();
    EXPECT_EQ(b["attempt"], 1);
    EXPECT_EQ(b["accounting"]["restarts"], 1);
    EXPECT_EQ(c["accounting"]["restarts"], 0);

    const std::string relaunch_log = testing::read_whole_file(run_dir(broken) / "logs" / "attempt-001.log");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(relaunch_log, m, std::regex(R"(resumed from \S+ \(step (\d+),)"))) << relaunch_log;
    const int64_t resumed_step = std::stoll(m[1]);
    // The newest checkpoint committed before the relaunch: one of every 5 steps, or
    // the one the trainer writes when SIGTERM stops it (the coordinator's teardown, which mpirun
    // passes on with a SIGCONT to a stopped rank).
    EXPECT_EQ(resumed_step, newest_committed_before(broken, relaunched_at));
    if (resume_at_most) {
      EXPECT_LE(resumed_step, *resume_at_most);
    }
    std::printf("[ fault    ] seed %llu: rank 1 broken after step %lld of %lld; attempt 1 resumed from step %lld\n",
                static_cast<unsigned long long>(seed_), static_cast<long long>(steps_at_fault_),
                static_cast<long long>(kSteps), static_cast<long long>(resumed_step));

    const std::vector<json> got = testing::tiny_job_metrics(tmp_ / "runs" / broken);
    const std::vector<json> want = testing::tiny_job_metrics(tmp_ / "runs" / clean);
    ASSERT_EQ(got.size(), static_cast<size_t>(kSteps));
    ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));
    for (size_t i = 0; i < got.size(); ++i) {
      for (const char* key : {"step", "loss", "grad_norm", "lr", "tokens"}) {
        EXPECT_EQ(got[i][key], want[i][key]) << key << " at step " << i + 1;
      }
    }
    EXPECT_EQ(got.back()["loss"].get<double>(), want.back()["loss"].get<double>()) << "the final loss";
    EXPECT_TRUE(got.back().contains("val_loss"));
    EXPECT_EQ(got.back()["val_loss"], want.back()["val_loss"]);
  }

  // The journal's times, once the relaunched attempt has sent its first heartbeat.
  testing::RecoveryTimes recovery_times(const std::string& run, double fault_time) const {
    std::optional<testing::RecoveryTimes> times;
    EXPECT_TRUE(testing::eventually(
        [&] { return (times = testing::recovery_times(*coordinator_, run, 0, fault_time)).has_value(); }, 30s));
    return times.value_or(testing::RecoveryTimes{});
  }

  testing::TempDir tmp_;
  fs::path config_;
  std::unique_ptr<testing::CoordinatorProcess> coordinator_;
  uint64_t seed_ = 0;
  int64_t fault_step_ = 0;
  pid_t rank1_ = -1, mpirun_ = -1;
  int64_t steps_at_fault_ = 0;
};

TEST_F(CoordinatorRecovery, AKilledRankIsRelaunchedFromTheLastCheckpointAndEndsExactly) {
  submit("killed", "clean");
  const double fault = break_rank_1("killed", SIGKILL);
  const testing::RecoveryTimes t = recovery_times("killed", fault);
  EXPECT_EQ(t.outcome, "crashed") << t.detail;
  EXPECT_GE(t.detected_s, 0);
  EXPECT_LT(t.detected_s, 10) << "mpirun should end the job soon after a rank died";
  // A dead rank trains no further: nothing after the step it was in can be committed.
  expect_recovered_exactly("killed", "clean", fault + t.relaunched_s, steps_at_fault_ + 1);
  std::printf(
      "[ measured ] SIGKILL of rank 1: job end detected %.3f s, relaunched %.3f s, training again (first "
      "heartbeat) %.3f s after the kill\n",
      t.detected_s, t.relaunched_s, t.resumed_s);
  RecordProperty("kill_to_training_again_ms", static_cast<int>(t.resumed_s * 1000));
}

TEST_F(CoordinatorRecovery, AStoppedRankIsDetectedByTheHeartbeatTimeoutAndRelaunched) {
  submit("stopped", "clean");
  const double fault = break_rank_1("stopped", SIGSTOP);
  const testing::RecoveryTimes t = recovery_times("stopped", fault);
  EXPECT_EQ(t.outcome, "hung") << t.detail;
  EXPECT_NE(t.detail.find("no heartbeat for 3 s"), std::string::npos) << t.detail;
  // The last heartbeat came before the fault, and the coordinator looks every 0.1 s.
  EXPECT_LE(t.detected_s, kHeartbeatTimeout_s + 0.5);
  EXPECT_TRUE(testing::eventually([&] { return coordinator::session_processes(mpirun_).empty(); }, 10s))
      << "processes of the torn-down job remain (the stopped rank " << rank1_ << "?)";
  // No bound from the fault step here: the teardown continues the stopped rank (mpirun's SIGCONT)
  // before its SIGTERM arrives, and the job may train and commit a few more millisecond steps.
  expect_recovered_exactly("stopped", "clean", fault + t.relaunched_s, std::nullopt);
  std::printf(
      "[ measured ] SIGSTOP of rank 1: declared hung %.3f s (heartbeat timeout %.0f s), relaunched %.3f s, "
      "training again (first heartbeat) %.3f s after the stop\n",
      t.detected_s, kHeartbeatTimeout_s, t.relaunched_s, t.resumed_s);
  RecordProperty("stop_to_training_again_ms", static_cast<int>(t.resumed_s * 1000));
}

}  // namespace
}  // namespace linea

// The coordinator's durable state: RunTable's state machine and time accounting on synthetic
// events; the journal (append, replay, a last line cut short by a crash, a damaged line, atomic
// compaction); and the whole coordinator killed with SIGKILL mid-sweep (in a forked process) and
// started again on the same state directory: no run is lost and none finishes twice. Also a
// graceful shutdown with a running job: the job is relaunched by the next coordinator, not charged
// to its restart budget; and a job that outlives a killed coordinator is adopted by the next one on
// the same address (not relaunched).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coordinator/journal.h"
#include "coordinator/metrics_log.h"
#include "coordinator/run_table.h"
#include "tests/testing/coordinator_harness.h"

namespace linea::testing {
namespace {

using namespace std::chrono_literals;
using coordinator::ExitOutcome;
using coordinator::RunState;
using coordinator::RunTable;

coordinator::RunSpec spec(const std::string& name) {
  coordinator::RunSpec s;
  s.name = name;
  s.config = "/configs/x.toml";
  s.run_dir = "/runs/" + name;
  return s;
}

TEST(RunTable, AccountsProductiveAndLostTimeAcrossARestart) {
  RunTable t;
  t.apply(RunTable::submitted({spec("a")}, std::nullopt, 90));
  t.apply(RunTable::launched("a", 0, 1000, 100));
  t.apply(RunTable::first_heartbeat("a", 0, 101));
  t.apply(RunTable::checkpointed("a", 0, 50, 110));                                                     // 100..110 kept
  t.apply(RunTable::exited("a", 0, ExitOutcome::crashed, "killed by signal 9", 115, 115, false, 116));  // 110..115 lost
  const coordinator::RunRecord& r = *t.find("a");
  EXPECT_EQ(r.state, RunState::backoff);
  EXPECT_EQ(r.accounting.restarts, 1);
  EXPECT_DOUBLE_EQ(r.next_launch_at, 116);
  t.apply(RunTable::launched("a", 1, 1001, 116));
  t.apply(RunTable::first_heartbeat("a", 1, 118));    // the gap 115..118 is lost; recovery 3 s
  t.apply(RunTable::checkpointed("a", 1, 100, 125));  // 118..125 kept
  t.apply(RunTable::exited("a", 1, ExitOutcome::completed, "exited with status 0", 130, 130, false, 0));
  EXPECT_EQ(r.state, RunState::completed);
  EXPECT_DOUBLE_EQ(r.accounting.lost_s, 5 + 3);
  EXPECT_DOUBLE_EQ(r.accounting.productive_s, 10 + 7 + 5);
  EXPECT_DOUBLE_EQ(r.accounting.wall_s(200, false), 30);
  ASSERT_EQ(r.accounting.recovery_s.size(), 1u);
  EXPECT_DOUBLE_EQ(r.accounting.recovery_s[0], 3);
  EXPECT_DOUBLE_EQ(r.accounting.goodput(), 22.0 / 30.0);
  EXPECT_EQ(r.checkpoint_step, 100);
}

TEST(RunTable, RejectsEventsThatDoNotFitTheState) {
  RunTable t;
  t.apply(RunTable::submitted({spec("a")}, std::nullopt, 1));
  EXPECT_THROW(t.apply(RunTable::submitted({spec("a")}, std::nullopt, 2)), std::invalid_argument);  // duplicate
  EXPECT_THROW(t.apply(RunTable::first_heartbeat("a", 0, 2)), std::invalid_argument);               // not running
  EXPECT_THROW(t.apply(RunTable::launched("a", 3, 10, 2)), std::invalid_argument);                  // wrong attempt
  EXPECT_THROW(t.apply(RunTable::launched("b", 0, 10, 2)), std::invalid_argument);                  // unknown run
  EXPECT_THROW(t.apply({{"event", "teleport"}, {"t", 3}}), std::invalid_argument);
  EXPECT_THROW(t.apply({{"event", "launch"}, {"t", "noon"}, {"run", "a"}}), std::invalid_argument);
  t.apply(RunTable::cancelled("a", 4));
  EXPECT_THROW(t.apply(RunTable::cancelled("a", 5)), std::invalid_argument);
}

TEST(RunTable, SnapshotRecreatesTheTable) {
  RunTable t;
  coordinator::SweepSpec sweep{"s", "/runs/s", "s/a", {}};
  t.apply(RunTable::submitted({spec("s/a"), spec("s/b")}, sweep, 1));
  t.apply(RunTable::launched("s/a", 0, 77, 2));
  t.apply(RunTable::exited("s/a", 0, ExitOutcome::hung, "no heartbeat", 5, 6, false, 7));
  RunTable copy;
  copy.apply(t.snapshot(8));
  EXPECT_EQ(copy.snapshot(8), t.snapshot(8));
  EXPECT_EQ(copy.find("s/a")->state, RunState::backoff);
  EXPECT_EQ(copy.find_sweep("s")->runs, (std::vector<std::string>{"s/a", "s/b"}));
}

TEST(Journal, ReplaysAppendedEventsAndDropsALineCutShort) {
  TempDir dir;
  const std::string state = dir / "state";
  {
    coordinator::Journal j(state);
    EXPECT_TRUE(j.replayed().empty());
    j.append(RunTable::submitted({spec("a")}, std::nullopt, 1));
    j.append(RunTable::launched("a", 0, 5, 2));
  }
  // A crash in the middle of an append leaves part of a line.
  std::ofstream(state + "/journal.jsonl", std::ios::app) << "{\"event\": \"exit\", \"run\": \"a\", \"t";
  {
    coordinator::Journal j(state);
    EXPECT_TRUE(j.dropped_partial_line());
    ASSERT_EQ(j.replayed().size(), 2u);
    EXPECT_EQ(j.replayed()[1]["event"], "launch");
    j.append(RunTable::cancelled("a", 3));  // lands on its own line, after the cut
  }
  coordinator::Journal j(state);
  EXPECT_FALSE(j.dropped_partial_line());
  ASSERT_EQ(j.replayed().size(), 3u);
  RunTable t;
  for (const auto& e : j.replayed()) t.apply(e);
  EXPECT_EQ(t.find("a")->state, RunState::cancelled);
}

TEST(Journal, RefusesADamagedLineNamingIt) {
  TempDir dir;
  const std::string state = dir / "state";
  {
    coordinator::Journal j(state);
    j.append(RunTable::submitted({spec("a")}, std::nullopt, 1));
  }
  std::ofstream(state + "/journal.jsonl", std::ios::app) << "garbage\n" << RunTable::cancelled("a", 2).dump() << "\n";
  try {
    coordinator::Journal j(state);
    FAIL() << "a damaged journal was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("journal.jsonl:2"), std::string::npos) << e.what();
  }
}

TEST(Journal, CompactionReplacesTheFileAtomically) {
  TempDir dir;
  const std::string state = dir / "state";
  RunTable t;
  {
    coordinator::Journal j(state);
    for (int i = 0; i < 50; ++i) {
      std::string name = std::to_string(i);
      name.insert(0, 1, 'r');  // not "r" + …: GCC 12's -Wrestrict false positive on that concatenation
      const nlohmann::json e = RunTable::submitted({spec(name)}, std::nullopt, i);
      t.apply(e);
      j.append(e);
    }
    j.compact({t.snapshot(60)});
    EXPECT_EQ(j.lines(), 1u);
    j.append(RunTable::cancelled("r7", 61));
  }
  for (const auto& entry : std::filesystem::directory_iterator(state)) {  // no temporary file left behind
    EXPECT_EQ(entry.path().filename().string().find("journal.jsonl.tmp"), std::string::npos) << entry.path();
  }
  coordinator::Journal j(state);
  ASSERT_EQ(j.replayed().size(), 2u);
  RunTable replayed;
  for (const auto& e : j.replayed()) replayed.apply(e);
  EXPECT_EQ(replayed.order().size(), 50u);
  EXPECT_EQ(replayed.find("r7")->state, RunState::cancelled);
}

// Runs a coordinator in a child process (so that it can be killed like a real one); returns its pid
// and port.
std::pair<pid_t, uint16_t> fork_coordinator(const coordinator::CoordinatorOptions& options) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    try {
      coordinator::Coordinator server(options);
      const uint16_t port = server.port();
      if (::write(fds[1], &port, sizeof port) != sizeof port) ::_exit(3);
      server.run();
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  uint16_t port = 0;
  const bool ok = ::read(fds[0], &port, sizeof port) == sizeof port;
  ::close(fds[0]);
  if (!ok) throw std::runtime_error("the coordinator child did not start");
  return {pid, port};
}

TEST(Recovery, CoordinatorKilledMidSweepLosesNoRunAndRunsNoneTwice) {
  TempDir dir;
  coordinator::CoordinatorOptions options = test_options(dir);
  options.slots = 2;
  const std::vector<std::string> names = {"r0", "r1", "r2", "r3"};
  const auto [pid, port] = fork_coordinator(options);
  const coordinator::Endpoint endpoint{"127.0.0.1", port};
  const std::string token = coordinator::read_token_file(options.token_file);
  auto request = [&](nlohmann::json m) { return coordinator::send_request(endpoint, token, std::move(m), 5s); };
  nlohmann::json runs = nlohmann::json::array();
  for (const std::string& name : names) runs.push_back(fake_run(dir, name, {"fake.steps=25", "fake.step_ms=20"}));
  request({{"type", "submit"}, {"runs", runs}});
  // Kill the coordinator once the first runs completed and the next ones are running.
  ASSERT_TRUE(wait_until(
      [&] {
        int completed = 0, running = 0;
        const nlohmann::json reply = request({{"type", "status"}});
        for (const auto& r : reply["runs"]) {
          completed += r["state"] == "completed";
          running += r["state"] == "running" && r["step"].get<int64_t>() >= 3;
        }
        return completed >= 1 && running >= 1;
      },
      15s));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));

  // Its jobs live on without it; a new coordinator on the same state directory takes over.
  CoordinatorThread second(options);
  for (const std::string& name : names) {
    const nlohmann::json s = wait_for_end(second, name, 20s);
    ASSERT_EQ(s["state"], "completed") << name << ": " << s.dump();
    EXPECT_EQ(completions(dir, name), 1) << name << " finished " << completions(dir, name) << " times";
    const coordinator::MetricsLog log = coordinator::read_metrics_log(dir / ("runs/" + name + "/metrics.jsonl"));
    EXPECT_TRUE(log.finished);
    EXPECT_EQ(log.points.size(), 25u);
  }
  int taken_over = 0;  // the second coordinator listens elsewhere: jobs it adopts cannot report and are stopped
  for (const std::string& name : names) {
    const nlohmann::json s = second.run_status(name);
    taken_over += s["accounting"]["interruptions"].get<int>() + s["accounting"]["adoptions"].get<int>();
    EXPECT_EQ(s["accounting"]["restarts"], 0) << "an interruption was charged to the restart budget";
  }
  EXPECT_GE(taken_over, 1);
}

// A coordinator killed while a job trains; the next one, on the same address, adopts the job (its
// heartbeats come back to the new coordinator) instead of killing it: no relaunch, nothing lost.
TEST(Recovery, ARestartedCoordinatorAdoptsTheJobsItFinds) {
  TempDir dir;
  coordinator::CoordinatorOptions options = test_options(dir);
  options.heartbeat_timeout_s = 2;
  const auto [pid, port] = fork_coordinator(options);
  const coordinator::Endpoint endpoint{"127.0.0.1", port};
  const std::string token = coordinator::read_token_file(options.token_file);
  auto request = [&](nlohmann::json m) { return coordinator::send_request(endpoint, token, std::move(m), 5s); };
  request({{"type", "submit"}, {"runs", {fake_run(dir, "long", {"fake.steps=60", "fake.step_ms=50"})}}});
  ASSERT_TRUE(wait_until(
      [&] {
        const nlohmann::json reply = request({{"type", "status"}});
        for (const auto& r : reply["runs"])
          if (r["step"].get<int64_t>() >= 10) return true;
        return false;
      },
      15s));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);

  options.port = port;
  CoordinatorThread second(options);
  const nlohmann::json s = wait_for_end(second, "long", 20s);
  ASSERT_EQ(s["state"], "completed") << s.dump();
  EXPECT_EQ(s["attempt"], 0) << "relaunched instead of adopted";
  EXPECT_EQ(s["accounting"]["adoptions"], 1);
  EXPECT_EQ(s["accounting"]["interruptions"], 0);
  EXPECT_EQ(s["accounting"]["restarts"], 0);
  EXPECT_GT(s["goodput"].get<double>(), 0.9) << s.dump();
  EXPECT_EQ(completions(dir, "long"), 1);
  EXPECT_EQ(coordinator::read_metrics_log(dir / "runs/long/metrics.jsonl").points.size(), 60u);
}

TEST(Recovery, ShutdownStopsJobsAndTheNextCoordinatorResumesThem) {
  TempDir dir;
  const coordinator::CoordinatorOptions options = test_options(dir);
  {
    CoordinatorThread first(options);
    first.request({{"type", "submit"}, {"runs", {fake_run(dir, "long", {"fake.steps=40", "fake.step_ms=20"})}}});
    ASSERT_TRUE(wait_until([&] { return first.run_status("long")["step"].get<int64_t>() >= 12; }, 10s));
    first.request({{"type", "shutdown"}});
    first.stop();  // returns once the job is down and the state is saved
  }
  CoordinatorThread second(options);
  const nlohmann::json s = wait_for_end(second, "long", 15s);
  ASSERT_EQ(s["state"], "completed") << s.dump();
  EXPECT_EQ(s["accounting"]["interruptions"], 1);
  EXPECT_EQ(s["accounting"]["restarts"], 0);
  EXPECT_EQ(s["attempt"], 1);
  EXPECT_EQ(completions(dir, "long"), 1);
  EXPECT_EQ(coordinator::read_metrics_log(dir / "runs/long/metrics.jsonl").points.size(), 40u);
}

}  // namespace
}  // namespace linea::testing

// The chaos soak (label `soak`): one `linea coordinator` runs a queue of identical 2-rank tiny
// training jobs (`mpirun -np 2 linea train`, tests/testing/tiny_training_job.h), two at a time,
// while a seeded schedule of kFaults faults breaks them, one at a time, each once the job it hits
// trains again after the previous one. The queue is topped up as runs start, so that there is
// always one to break however fast the jobs train beside the faults (a fixed queue of 24 ran dry
// on an idle machine). A fault is dealt at a step the test knows: the job's ranks are frozen
// (SIGSTOP, tests/testing/frozen_job.h) while the test reads its logged steps and breaks it, and a
// job found too close to its end (loaded cores can starve the test while the job trains on) or
// ended is thawed unbroken, and the fault goes to the next run picked:
//   kill_rank     SIGKILL of one rank (mpirun ends the job; the coordinator relaunches it);
//   stop_rank     SIGSTOP of one rank (its heartbeats stop: torn down as hung, relaunched);
//   kill_mpirun   SIGKILL of mpirun (its ranks are left; the coordinator ends them and relaunches);
//   kill_coordinator  SIGKILL of the coordinator; a new one on the same address adopts the jobs
//                 (the one broken is thawed once the new coordinator listens; the other trains on);
//   fill_disk     the job's checkpoints file system (a small tmpfs) filled, and kept full: the run
//                 stops after its failed checkpoints (the coordinator names the reason), is
//                 relaunched once the disk has room again;
//   damage_newest a byte of every rank file of the newest committed checkpoint flipped, then a
//                 rank killed: the relaunch falls back to the previous checkpoint and sets the
//                 damaged one aside (were it still committed, a later damage_newest of the run
//                 would flip the byte back, and a resume from it leave a gap in metrics.jsonl).
// Afterwards every run that was launched trains to its end, and its metrics.jsonl equals, line by
// line and bit for bit in every field that does not measure time (step, loss, grad_norm, lr,
// tokens), that of the same job trained once without faults. Printed: the faults survived by
// kind, steps lost per fault (logged at the fault − resumed from), and the time from each fault to
// training again (the next first heartbeat, or for the coordinator the first step it hears of
// after its restart): median and max; and how many picked runs were passed over. LINEA_SOAK_SEED=N
// repeats a schedule (the runs it hits depend on timing).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_directory.h"
#include "coordinator/coordinator.h"
#include "coordinator/job_process.h"
#include "tests/testing/child_process.h"
#include "tests/testing/coordinator_process.h"
#include "tests/testing/damaged_checkpoint.h"
#include "tests/testing/frozen_job.h"
#include "tests/testing/small_file_system.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tiny_training_job.h"
#include "tests/testing/train_job.h"

namespace linea {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kFaults = 30;
constexpr int kQueued = 2;       // runs waiting for a slot, at least (those never launched at the end are cancelled)
constexpr int64_t kSteps = 300;  // per run
// A fault is dealt only while the run has at most kSteps - kLastFaultMargin steps logged: a full disk
// then fails at least two checkpoint writes (every 5 steps) and stops the run before its end.
constexpr int64_t kLastFaultMargin = 20;
constexpr int64_t kFileSystemBytes = 8 << 20;

enum class Fault { kill_rank, stop_rank, kill_mpirun, kill_coordinator, fill_disk, damage_newest };
const char* fault_name(Fault f) {
  switch (f) {
    case Fault::kill_rank: return "kill_rank";
    case Fault::stop_rank: return "stop_rank";
    case Fault::kill_mpirun: return "kill_mpirun";
    case Fault::kill_coordinator: return "kill_coordinator";
    case Fault::fill_disk: return "fill_disk";
    case Fault::damage_newest: return "damage_newest";
  }
  return "?";
}

// What one fault cost.
struct FaultRecord {
  Fault kind;
  std::string run;
  int64_t steps_lost = 0;
  double to_training_s = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

class ChaosSoak : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* seed_text = std::getenv("LINEA_SOAK_SEED");
    seed_ = seed_text ? std::strtoull(seed_text, nullptr, 10) : std::random_device()();
    rng_.seed(seed_);
    config_ = testing::write_tiny_training_job(tmp_.path(), kSteps);
  }

  static std::string run_name(int i) {  // r00, r01, ... (snprintf: GCC 12 warns of -Wrestrict on "r" + a substr)
    char name[16];
    std::snprintf(name, sizeof name, "r%02d", i);
    return name;
  }
  fs::path run_dir(const std::string& run) const { return tmp_.path() / "runs" / run / "faulty"; }
  fs::path checkpoints(const std::string& run) const { return run_dir(run) / "checkpoints"; }
  std::vector<std::string> overrides(const fs::path& run_root) const {
    return testing::tiny_job_overrides(tmp_.path(), run_root, {"train.keep_checkpoints=3"});
  }

  void start_coordinator(uint16_t port) {
    coordinator_ = std::make_unique<testing::CoordinatorProcess>(
        LINEA_BINARY, tmp_.path() / "state",
        std::vector<std::string>{"--slots", "2", "--heartbeat-timeout", "2", "--startup-timeout", "60", "--backoff",
                                 "0", "--kill-grace", "1", "--max-restarts", "1000"},
        port);
  }

  // Queues `count` more runs, each with its small file system for its checkpoints.
  void submit(int count) {
    json runs = json::array();
    for (int i = 0; i < count; ++i) {
      const std::string run = run_name(static_cast<int>(disks_.size()));
      disks_[run] = std::make_unique<testing::SmallFileSystem>(checkpoints(run), kFileSystemBytes);
      runs.push_back({{"name", run},
                      {"config", config_.string()},
                      {"overrides", overrides(tmp_.path() / "runs" / run)},
                      {"run_dir", run_dir(run).string()},
                      {"processes", 2}});
    }
    disk_faults_ = disks_.begin()->second->mounted();
    coordinator_->request({{"type", "submit"}, {"runs", runs}});
  }

  // A run that trains now (its current attempt has sent heartbeats, has a committed checkpoint and
  // is far enough from its end to outlive a fault), chosen by the schedule; empty after 60 s. Tops
  // the queue up to kQueued runs not launched yet.
  std::string pick_training_run() {
    const auto deadline = Clock::now() + 60s;
    while (Clock::now() < deadline) {
      std::vector<std::string> ready;
      int waiting = 0;
      const json status = coordinator_->request({{"type", "status"}});
      for (const json& r : status["runs"]) {
        const std::string run = r["spec"]["name"];
        if (r["attempt"].get<int64_t>() < 0) ++waiting;
        if (r["state"] == "running" && r.value("heartbeat_seen", false) && r.value("checkpoint_step", -1) >= 5 &&
            logged_steps(run) < kSteps - 40)  // not the status's step: a restarted coordinator's is 0 until a heartbeat
          ready.push_back(run);
      }
      if (waiting < kQueued) submit(kQueued - waiting);
      if (!ready.empty()) return ready[std::uniform_int_distribution<size_t>(0, ready.size() - 1)(rng_)];
      std::this_thread::sleep_for(20ms);
    }
    return "";
  }

  // The journal's time of the first heartbeat of `attempt` of `run`.
  std::optional<double> first_heartbeat_time(const std::string& run, int64_t attempt) const {
    for (const json& e : coordinator_->journal()) {
      if (e.value("run", "") == run && e.value("event", "") == "first_heartbeat" && e.value("attempt", -1) == attempt)
        return e["t"].get<double>();
    }
    return std::nullopt;
  }

  // The step attempt `attempt` of `run` resumed from (0: a fresh start).
  int64_t resumed_step(const std::string& run, int64_t attempt) const {
    char name[32];
    std::snprintf(name, sizeof name, "attempt-%03lld.log", static_cast<long long>(attempt));
    const std::string log = testing::read_whole_file(run_dir(run) / "logs" / name);
    std::smatch m;
    if (std::regex_search(log, m, std::regex(R"(resumed from \S+ \(step (\d+),)"))) return std::stoll(m[1]);
    return 0;
  }

  // What each attempt's log says of checkpoints (resumed from, damaged, set aside, stopping), for a
  // failure's message: the journal no longer holds the attempts before a coordinator's restart.
  std::string attempt_notes(const std::string& run) const {
    std::vector<fs::path> logs;
    for (const auto& entry : fs::directory_iterator(run_dir(run) / "logs")) logs.push_back(entry.path());
    std::sort(logs.begin(), logs.end());
    const std::regex noted("resumed from|damaged|set aside|stopping|checkpoint.*failed");
    std::string notes;
    for (const fs::path& log : logs) {
      std::istringstream lines(testing::read_whole_file(log));
      for (std::string line; std::getline(lines, line);) {
        if (std::regex_search(line, noted)) notes += log.filename().string() + ": " + line.substr(0, 300) + "\n";
      }
    }
    return notes;
  }

  int64_t logged_steps(const std::string& run) const { return testing::logged_steps(run_dir(run) / "metrics.jsonl"); }

  // Breaks `run` with `kind` while its job is frozen, if it has logged at most kSteps -
  // kLastFaultMargin steps by then; returns what it cost once the run trains again, or nullopt
  // (the job thawed unbroken) when it was too close to its end or is no longer the attempt picked
  // (ended or relaunched since).
  std::optional<FaultRecord> inflict(Fault kind, const std::string& run) {
    FaultRecord record{kind, run};
    const json before = coordinator_->run_status(run);
    if (before["state"] != "running" || !before["pid"].is_number_integer()) return std::nullopt;
    const int64_t attempt = before["attempt"];
    const auto mpirun = static_cast<pid_t>(before["pid"].get<int64_t>());
    testing::FrozenJob job(mpirun);
    const int64_t steps_at_fault = logged_steps(run);
    const json frozen = coordinator_->run_status(run);
    const pid_t rank = job.rank(std::uniform_int_distribution<int>(0, 1)(rng_));
    if (steps_at_fault > kSteps - kLastFaultMargin || frozen["attempt"] != attempt || frozen["state"] != "running" ||
        rank < 0)
      return std::nullopt;
    const pid_t victim =
        kind == Fault::kill_mpirun || kind == Fault::kill_coordinator || kind == Fault::fill_disk ? mpirun : rank;
    const double fault_time = coordinator::unix_now();
    switch (kind) {
      case Fault::kill_rank:
      case Fault::kill_mpirun: ::kill(victim, SIGKILL); break;
      case Fault::stop_rank: break;  // it stays stopped when the job thaws
      case Fault::damage_newest: {
        const auto committed = list_committed_checkpoints(checkpoints(run));
        if (committed.empty()) return std::nullopt;
        testing::damage_checkpoint(committed.back().directory);
        ::kill(victim, SIGKILL);
        break;
      }
      case Fault::fill_disk: disks_.at(run)->fill(); break;
      case Fault::kill_coordinator: {
        const uint16_t port = coordinator_->port();
        coordinator_->kill();
        coordinator_.reset();
        start_coordinator(port);
        job.thaw();
        // Adopted: the same attempt reports to the new coordinator (or, had no heartbeat of its
        // last steps reached it, is found completed by it).
        const json after = coordinator_->wait_for(
            run,
            [&](const json& s) {
              return s["attempt"] != attempt || s["step"].get<int64_t>() > steps_at_fault || s["state"] == "completed";
            },
            60s, "heard of after the coordinator's restart");
        record.to_training_s = coordinator::unix_now() - fault_time;
        EXPECT_EQ(after["attempt"], attempt) << run << " was relaunched, not adopted";
        record.steps_lost = after["attempt"] == attempt ? 0 : steps_at_fault - resumed_step(run, after["attempt"]);
        return record;
      }
    }
    job.thaw(kind == Fault::stop_rank ? victim : -1);
    if (kind == Fault::fill_disk) {
      // It stops after its failed checkpoints; the coordinator names the reason; then room again.
      // The disk is topped up while it trains on: a write the freeze caught before its commit may
      // still commit on thaw and prune the oldest checkpoint, which frees room for the next.
      const json ended = coordinator_->wait_for(
          run,
          [&](const json& s) {
            disks_.at(run)->fill();
            return s["attempt"] != attempt || s["state"] != "running";
          },
          60s, "stopped by the full disk");
      disks_.at(run)->make_room();
      EXPECT_NE(ended.value("last_error", "").find("its last checkpoint failed"), std::string::npos)
          << "seed " << seed_ << ": " << ended.dump();
    }
    // Training again: the next attempt's first heartbeat, or (on loaded cores) that attempt ran
    // its last steps and completed before a heartbeat was due; then its end bounds the time from
    // above. The attempt broken never completes: it was dealt the fault steps before its end.
    std::optional<double> back;
    coordinator_->wait_for(
        run,
        [&](const json& s) {
          if (s["attempt"].get<int64_t>() == attempt && s["state"] == "completed") {
            ADD_FAILURE() << run << " attempt " << attempt << " completed after " << fault_name(kind) << " at step "
                          << steps_at_fault << " (seed " << seed_ << "): " << s.dump();
            back = s["accounting"]["ended_at"].get<double>();
            return true;
          }
          if (s["attempt"].get<int64_t>() <= attempt) return false;
          back = first_heartbeat_time(run, s["attempt"].get<int64_t>());
          if (!back && s["state"] == "completed") back = s["accounting"]["ended_at"].get<double>();
          return back.has_value();
        },
        60s, std::string("training again after ") + fault_name(kind));
    const int64_t relaunched = coordinator_->run_status(run)["attempt"];
    record.to_training_s = *back - fault_time;
    record.steps_lost =
        relaunched == attempt ? 0 : std::max<int64_t>(0, steps_at_fault - resumed_step(run, relaunched));
    if (kind == Fault::stop_rank) ::kill(victim, SIGKILL);  // in case the teardown left it stopped
    return record;
  }

  testing::TempDir tmp_;
  fs::path config_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  std::map<std::string, std::unique_ptr<testing::SmallFileSystem>> disks_;  // by run
  bool disk_faults_ = false;
  std::unique_ptr<testing::CoordinatorProcess> coordinator_;
};

TEST_F(ChaosSoak, EveryJobEndsAsIfNeverBroken) {
  const auto start = Clock::now();
  std::printf("[ soak     ] seed %llu (LINEA_SOAK_SEED repeats it)\n", static_cast<unsigned long long>(seed_));
  // The same job once, unbroken, beside the soak.
  testing::TrainJob reference(config_, overrides(tmp_.path() / "reference"), tmp_.path() / "reference.log");
  start_coordinator(0);
  submit(2 + kQueued);

  // The schedule: every kind equally often (a full disk only where a small file system can be
  // mounted; a rank kill instead), in a seeded order.
  std::vector<Fault> schedule;
  for (int i = 0; i < kFaults; ++i) {
    Fault f = static_cast<Fault>(i % 6);
    if (f == Fault::fill_disk && !disk_faults_) f = Fault::kill_rank;
    schedule.push_back(f);
  }
  std::shuffle(schedule.begin(), schedule.end(), rng_);
  std::vector<FaultRecord> records;
  int passed_over = 0;  // runs picked but found too close to their end (or ended) when frozen
  for (const Fault kind : schedule) {
    for (std::optional<FaultRecord> record; !record;) {
      const std::string run = pick_training_run();
      ASSERT_FALSE(run.empty()) << "no run trains to break; coordinator log:\n" << coordinator_->log();
      ASSERT_LT(passed_over, kFaults) << "runs picked kept ending before their faults (seed " << seed_ << ")";
      // A few more steps first, at a point the schedule chooses.
      const int64_t at = logged_steps(run) + std::uniform_int_distribution<int64_t>(1, 8)(rng_);
      testing::eventually([&] { return logged_steps(run) >= at; }, 20s);
      try {
        record = inflict(kind, run);
      } catch (const std::exception& e) {
        FAIL() << fault_name(kind) << " of " << run << " (seed " << seed_ << "): " << e.what();
      }
      if (record) records.push_back(*record);
      passed_over += record ? 0 : 1;
    }
  }

  // The faults are over: the runs not launched yet are cancelled; the others train to their end.
  std::vector<std::string> launched;
  json cancel = json::array();
  const json status = coordinator_->request({{"type", "status"}});
  for (const json& r : status["runs"]) {
    (r["attempt"].get<int64_t>() >= 0 ? launched.push_back(r["spec"]["name"]) : cancel.push_back(r["spec"]["name"]));
  }
  if (!cancel.empty()) coordinator_->request({{"type", "cancel"}, {"runs", cancel}});
  for (const std::string& run : launched) {
    const json s = coordinator_->wait_for_end(run, 120s);
    EXPECT_EQ(s["state"], "completed") << s.dump();
  }
  ASSERT_EQ(reference.wait(120s), 0) << reference.output();
  const std::vector<json> want = testing::tiny_job_metrics(tmp_.path() / "reference");
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));
  for (const std::string& run : launched) {
    const std::vector<json> got = testing::tiny_job_metrics(tmp_.path() / "runs" / run);
    if (got.size() != want.size()) {  // which steps, and where its attempts resumed
      std::string steps;
      for (const json& line : got) steps += std::to_string(line["step"].get<int64_t>()) + " ";
      ADD_FAILURE() << run << " (seed " << seed_ << "): " << got.size() << " lines, steps " << steps
                    << "\nits attempts' logs:\n"
                    << attempt_notes(run);
      continue;
    }
    for (size_t i = 0; i < got.size(); ++i) {
      for (const char* key : {"step", "loss", "grad_norm", "lr", "tokens"}) {
        ASSERT_EQ(got[i][key], want[i][key]) << run << ": " << key << " at step " << i + 1;
      }
    }
  }

  std::map<std::string, int> by_kind;
  std::vector<double> to_training, lost;
  for (const FaultRecord& r : records) {
    ++by_kind[fault_name(r.kind)];
    to_training.push_back(r.to_training_s);
    lost.push_back(static_cast<double>(r.steps_lost));
  }
  std::string kinds;
  for (const auto& [kind, n] : by_kind) kinds += (kinds.empty() ? "" : ", ") + kind + " " + std::to_string(n);
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf(
      "[ soak     ] seed %llu: %zu faults survived (%s) over %zu runs of %lld steps (%d picked runs passed over: "
      "near their end or ended), every metrics.jsonl as the unbroken run's; steps lost per fault: mean %.1f, max "
      "%.0f; fault -> training again: median %.2f s, max %.2f s; %.0f s in all%s\n",
      static_cast<unsigned long long>(seed_), records.size(), kinds.c_str(), launched.size(),
      static_cast<long long>(kSteps), passed_over, lost.empty() ? 0.0 : [&] {
        double sum = 0;
        for (double x : lost) sum += x;
        return sum / static_cast<double>(lost.size());
      }(),
      lost.empty() ? 0.0 : *std::max_element(lost.begin(), lost.end()), median(to_training),
      to_training.empty() ? 0.0 : *std::max_element(to_training.begin(), to_training.end()), wall,
      disk_faults_ ? "" : " (no small file system could be mounted: full disks replaced by rank kills)");
  for (const FaultRecord& r : records) {
    std::printf("[ fault    ] %-16s %s: %lld steps lost, training again after %.2f s\n", fault_name(r.kind),
                r.run.c_str(), static_cast<long long>(r.steps_lost), r.to_training_s);
  }
  RecordProperty("faults", static_cast<int>(records.size()));
  RecordProperty("to_training_median_ms", static_cast<int>(median(to_training) * 1000));
}

}  // namespace
}  // namespace linea

// `linea coordinator` as a child process, for the end-to-end fault tests (tests/fault) and the
// recovery benchmark (bench/bench_recovery.cpp); no GoogleTest here, errors are exceptions.
// - CoordinatorProcess: the real binary on a free loopback port (--port 0, or a given one: a
//   coordinator started again where a killed one listened) with its own state directory, started
//   in a session of its own; requests go through send_request() with the token it created; on
//   destruction it is asked to shut down (it tears its jobs down), then killed. kill() is SIGKILL.
// - job_rank_pid(): the process of one MPI rank of a run's job (the mpirun the status names).
// - logged_steps(): the lines of a run's metrics.jsonl.
// - recovery_times(): from the coordinator's journal (state/journal.jsonl), how long after a fault
//   (a unix time) the coordinator saw attempt 0 end, launched attempt 1, and got attempt 1's first
//   heartbeat, which the trainer sends right after logging the attempt's first step.
#pragma once
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/client.h"
#include "coordinator/job_process.h"
#include "coordinator/token_file.h"

namespace linea::testing {

class CoordinatorProcess {
 public:
  // Starts `linea_binary coordinator --port PORT --state-dir STATE_DIR OPTIONS...` (its log, appended
  // to: STATE_DIR.log) and waits up to 30 s for it to listen.
  CoordinatorProcess(const std::string& linea_binary, const std::filesystem::path& state_dir,
                     const std::vector<std::string>& options, uint16_t port = 0)
      : state_dir_(state_dir), log_(state_dir.string() + ".log") {
    const size_t log_start = log().size();  // a restarted coordinator's log follows the earlier one's
    coordinator::JobCommand command;
    command.argv = {linea_binary, "coordinator", "--port", std::to_string(port), "--state-dir", state_dir.string()};
    command.argv.insert(command.argv.end(), options.begin(), options.end());
    command.log_path = log_.string();
    pid_ = coordinator::spawn_job(command);
    const std::string marker = "listening on 127.0.0.1:";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      const std::string text = log();
      if (const size_t at = text.find(marker, log_start);
          at != std::string::npos && text.find('\n', at) != std::string::npos) {
        endpoint_.port = static_cast<uint16_t>(std::stoul(text.substr(at + marker.size())));
        break;
      }
      if (coordinator::try_reap(pid_) || std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("linea coordinator did not start listening; its log:\n" + text);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    token_ = coordinator::read_token_file((state_dir / "token").string());
  }
  ~CoordinatorProcess() {
    try {
      request({{"type", "shutdown"}});
    } catch (const std::exception&) {
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!coordinator::try_reap(pid_)) {
      if (std::chrono::steady_clock::now() > deadline) {
        coordinator::signal_session(pid_, SIGKILL);
        coordinator::try_reap(pid_);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  CoordinatorProcess(const CoordinatorProcess&) = delete;
  CoordinatorProcess& operator=(const CoordinatorProcess&) = delete;

  uint16_t port() const { return endpoint_.port; }
  // SIGKILL, as a crash: its jobs live on.
  void kill() {
    ::kill(pid_, SIGKILL);
    while (!coordinator::try_reap(pid_)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  nlohmann::json request(nlohmann::json message) const {
    return coordinator::send_request(endpoint_, token_, std::move(message), std::chrono::seconds(10));
  }
  // The run's entry in the status reply, or null.
  nlohmann::json run_status(const std::string& run) const {
    const nlohmann::json reply = request({{"type", "status"}});
    for (const nlohmann::json& r : reply["runs"])
      if (r["spec"]["name"] == run) return r;
    return nullptr;
  }
  // Polls the run's status every 20 ms until `done(status)` holds; throws after `limit`, or as soon
  // as the run has failed or was cancelled.
  template <typename Predicate>
  nlohmann::json wait_for(const std::string& run, Predicate done, std::chrono::milliseconds limit,
                          const std::string& what) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      const nlohmann::json status = run_status(run);
      if (!status.is_null() && done(status)) return status;
      const std::string state = status.is_null() ? "" : status.value("state", "");
      const bool hopeless = state == "failed" || state == "cancelled";
      if (hopeless || std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("run " + run + ": not " + what +
                                 (hopeless ? " and never will be" : " after " + std::to_string(limit.count()) + " ms") +
                                 "; status: " + status.dump() + "\ncoordinator log:\n" + log());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  nlohmann::json wait_for_end(const std::string& run, std::chrono::milliseconds limit) const {
    return wait_for(
        run,
        [](const nlohmann::json& s) {
          const std::string state = s.value("state", "");
          return state == "completed" || state == "failed" || state == "cancelled";
        },
        limit, "ended");
  }

  std::vector<nlohmann::json> journal() const {
    std::ifstream in(state_dir_ / "journal.jsonl");
    std::vector<nlohmann::json> events;
    for (std::string line; std::getline(in, line);) {  // a line being written now is left for later
      nlohmann::json event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (event.is_object()) events.push_back(std::move(event));
    }
    return events;
  }
  std::string log() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

 private:
  std::filesystem::path state_dir_;
  std::filesystem::path log_;
  coordinator::Endpoint endpoint_;
  std::string token_;
  pid_t pid_ = -1;
};

// Waits (up to `limit`) for the job of attempt `attempt` of `run` to have MPI rank `rank` running;
// returns that process. The status names the job's first process (mpirun); ranks are its children
// with OMPI_COMM_WORLD_RANK in their environment.
inline pid_t job_rank_pid(const CoordinatorProcess& coordinator, const std::string& run, int64_t attempt, int rank,
                          std::chrono::milliseconds limit) {
  const std::string entry = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  pid_t found = -1;
  coordinator.wait_for(
      run,
      [&](const nlohmann::json& s) {
        if (s.value("attempt", int64_t{-1}) != attempt || !s.contains("pid") || !s["pid"].is_number_integer())
          return false;
        const auto mpirun = static_cast<pid_t>(s["pid"].get<int64_t>());
        for (const pid_t p : coordinator::session_processes(mpirun)) {
          if (p != mpirun && coordinator::process_has_environment_entry(p, entry)) found = p;
        }
        return found > 0;
      },
      limit, "running rank " + std::to_string(rank) + " of attempt " + std::to_string(attempt));
  return found;
}

// The steps a trainer has logged in a metrics.jsonl (train.log_every = 1): its complete lines.
inline int64_t logged_steps(const std::filesystem::path& metrics_jsonl) {
  std::ifstream in(metrics_jsonl, std::ios::binary);
  return static_cast<int64_t>(std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n'));
}

// Seconds from a fault (unix time) to what the journal records of the run's next attempt.
struct RecoveryTimes {
  int64_t attempt = 0;      // the attempt that was broken
  std::string outcome;      // how the coordinator classified its end: "crashed", "hung", ...
  std::string detail;       // e.g. "no heartbeat for 3 s", "exited with status 137"
  double detected_s = 0;    // fault → the coordinator saw the attempt end (or declared it hung)
  double relaunched_s = 0;  // fault → the next attempt launched
  double resumed_s = 0;     // fault → the next attempt's first heartbeat: training again
};

// The journal's record of the end of `attempt` and of the next attempt's launch and first heartbeat;
// nullopt while any of them is missing.
inline std::optional<RecoveryTimes> recovery_times(const CoordinatorProcess& coordinator, const std::string& run,
                                                   int64_t attempt, double fault_unix_time) {
  RecoveryTimes r;
  r.attempt = attempt;
  bool ended = false, launched = false, resumed = false;
  for (const nlohmann::json& e : coordinator.journal()) {
    if (e.value("run", "") != run) continue;
    const std::string event = e.value("event", "");
    const int64_t a = e.value("attempt", int64_t{-1});
    if (event == "exit" && a == attempt) {
      ended = true;
      r.outcome = e.value("outcome", "");
      r.detail = e.value("detail", "");
      r.detected_s = e["detected_at"].get<double>() - fault_unix_time;
    } else if (event == "launch" && a == attempt + 1) {
      launched = true;
      r.relaunched_s = e["t"].get<double>() - fault_unix_time;
    } else if (event == "first_heartbeat" && a == attempt + 1) {
      resumed = true;
      r.resumed_s = e["t"].get<double>() - fault_unix_time;
    }
  }
  if (!(ended && launched && resumed)) return std::nullopt;
  return r;
}

}  // namespace linea::testing

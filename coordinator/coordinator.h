// Coordinator: the job server behind `linea coordinator`. It owns the run table (journaled in the
// state directory and replayed at start), serves the wire protocol of protocol.h through a
// LineServer, and supervises jobs on one Boost.Asio thread. Every `tick`:
//   - reaps ended jobs: exit 0 → completed; any other end → relaunch after an exponential backoff
//     (backoff_base_s · 2^restarts, at most backoff_max_s) until max_restarts relaunches are spent,
//     then failed;
//   - tears down (SIGTERM to every process of the job's session, SIGKILL after kill_grace_s) a job
//     that sent no heartbeat for heartbeat_timeout_s (startup_timeout_s before its first one);
//   - launches queued runs while fewer than `slots` jobs are active (running or in backoff);
//   - writes RUN_DIR/coordinator.json when a run ends, and the sweep's results (results.h) when
//     every run of a sweep has ended.
// A run whose directory shows it finished (run_directory.h) is never launched again. At start, jobs
// left by a previous coordinator on the same state directory (they carry LINEA_COORDINATOR_STATE_DIR)
// are adopted when they are the live job of a running run: supervised by pid (its end is its session
// emptying) and heartbeats, which reach this coordinator when it listens on the same address; an
// adopted job silent for heartbeat_timeout_s is stopped with SIGTERM (so it checkpoints) and its
// run relaunched at once as interrupted, not charged a restart. Other processes they left get
// SIGTERM, then SIGKILL after kill_grace_s; their runs are relaunched unless finished.
// Jobs get LINEA_COORDINATOR, LINEA_COORDINATOR_TOKEN_FILE, LINEA_RUN_ID and LINEA_ATTEMPT.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "coordinator/asio.h"
#include "coordinator/journal.h"
#include "coordinator/launch_template.h"
#include "coordinator/line_server.h"
#include "coordinator/protocol.h"
#include "coordinator/run_table.h"

namespace linea::coordinator {

struct CoordinatorOptions {
  std::string host = "127.0.0.1";
  uint16_t port = kDefaultPort;  // 0: any free port (see Coordinator::port())
  int64_t slots = 1;
  std::string state_dir;   // journal, lock, default token file
  std::string token_file;  // must exist with owner-only permissions
  double heartbeat_timeout_s = 300;
  double startup_timeout_s = 900;
  int64_t max_restarts = 3;
  double backoff_base_s = 5;
  double backoff_max_s = 300;
  double kill_grace_s = 10;
  std::string hostfile;  // passed to mpirun as --hostfile when set
  LaunchTemplate launch = LaunchTemplate::defaults();
  std::string linea_binary;  // {linea} in the launch template; empty: this executable
  double tick_s = 0.1;
  size_t compact_after_lines = 10000;
  LineServerLimits limits;
  bool handle_signals = false;  // SIGINT/SIGTERM stop the coordinator as a shutdown request does

  // Throws std::invalid_argument naming the option ("--slots: expected ...").
  void validate() const;
};

class Coordinator {
 public:
  // Reads the token, opens and replays the journal, recovers runs left running, and listens.
  explicit Coordinator(CoordinatorOptions options);
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  uint16_t port() const { return server_->port(); }
  // Serves until a shutdown request (or stop()); running jobs are then torn down and recorded as
  // interrupted, to be relaunched by the next coordinator. Throws std::runtime_error when the
  // journal cannot be written (the state on disk stays consistent).
  void run();
  // Thread-safe: the same as a shutdown request.
  void stop();

 private:
  struct LiveJob;

  nlohmann::json handle_line(std::string_view line);
  nlohmann::json handle_submit(const nlohmann::json& body);
  nlohmann::json handle_status();
  nlohmann::json handle_cancel(const nlohmann::json& body);
  nlohmann::json handle_register(const nlohmann::json& body);
  nlohmann::json handle_heartbeat(const nlohmann::json& body);
  void begin_stop();

  void commit(const nlohmann::json& event);
  void schedule_tick();
  void tick();
  void reap_jobs();
  void enforce_timeouts();
  void launch_ready_runs();
  void launch(RunRecord& run);
  bool finished(const RunRecord& run) const;  // run_directory.h's run_finished(), errors logged
  // The status a restarted coordinator shows before the first heartbeat: the last metrics line.
  void refresh_progress_from_metrics(RunRecord& run);
  void begin_teardown(const std::string& run, ExitOutcome reason, const std::string& detail);
  void write_run_summary(const RunRecord& run);
  void write_finished_sweeps();
  void recover_left_running_jobs();
  double backoff_s(int64_t restarts) const;

  CoordinatorOptions options_;
  std::string token_;
  std::string advertised_endpoint_;
  Journal journal_;
  RunTable table_;
  boost::asio::io_context io_;
  std::unique_ptr<LineServer> server_;
  boost::asio::steady_timer tick_timer_;
  boost::asio::signal_set signals_;
  std::map<std::string, LiveJob, std::less<>> live_;
  bool stopping_ = false;
};

// Unix time in seconds.
double unix_now();

}  // namespace linea::coordinator

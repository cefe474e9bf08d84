// RunTable: the coordinator's state — every submitted run (in submission order) and sweep — as a
// pure state machine driven by journal events (JSON objects with an "event" field and a time "t"
// in Unix seconds). The coordinator makes an event, appends it to the journal, then applies it;
// replaying the journal applies the same events, so a restarted coordinator has the same table.
//
// Run states: queued → running → (backoff → running)* → completed | failed; cancelled from any
// non-terminal state.
//
// Time accounting (goodput), per run; every second between the first launch and the end is put in
// exactly one bucket, up to `classified_until`:
//   productive_s: time whose work was kept: up to a newly committed checkpoint, or up to the end;
//   lost_s: time whose work was lost: from the last commit to a crash/hang/interruption, plus the
//           gap from that failure to the relaunched job's first heartbeat (teardown, backoff,
//           start, checkpoint load).
// goodput = productive / (productive + lost). recovery_s lists, per relaunch, the time from the
// failure's detection to the relaunched job's first heartbeat.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coordinator/run_spec.h"

namespace linea::coordinator {

enum class RunState { queued, running, backoff, completed, failed, cancelled };
std::string_view run_state_name(RunState state);
bool is_terminal(RunState state);

// How a job's process ended.
enum class ExitOutcome {
  completed,    // exited with status 0
  crashed,      // non-zero exit or a signal
  hung,         // no heartbeat within the timeout; torn down by the coordinator
  interrupted,  // stopped because the coordinator stopped (not the run's fault: not charged)
};
std::string_view exit_outcome_name(ExitOutcome outcome);

struct RunAccounting {
  double first_launch_at = 0;  // 0: never launched
  double ended_at = 0;         // 0: not ended
  double classified_until = 0;
  double productive_s = 0;
  double lost_s = 0;
  int64_t restarts = 0;       // relaunches after a crash or a hang (charged to the restart budget)
  int64_t interruptions = 0;  // relaunches after a coordinator stop
  int64_t adoptions = 0;      // times a restarted coordinator took over the running job (no relaunch)
  double failure_at = 0;      // detection time of a failure not yet recovered from (0: none)
  std::vector<double> recovery_s;

  // Wall time so far: every classified second plus, while a job is active, the rest up to `now`.
  double wall_s(double now, bool active) const;
  double goodput() const;
};

// Live progress from heartbeats; kept in memory only (metrics.jsonl is the durable record).
struct RunProgress {
  int64_t step = -1;
  double loss = 0;
  double tokens_per_s = 0;
  std::optional<double> val_loss;
  std::string checkpoint_error{};  // why the job's newest checkpoint write failed ("": it did not)
};

struct RunRecord {
  RunSpec spec;
  RunState state = RunState::queued;
  int64_t attempt = -1;          // index of the last launch (LINEA_ATTEMPT); -1: never launched
  int64_t pid = 0;               // session leader of the current process; 0: none
  bool heartbeat_seen = false;   // the current attempt has sent a heartbeat
  double next_launch_at = 0;     // backoff: not relaunched before this time
  int64_t checkpoint_step = -1;  // the last committed checkpoint a heartbeat reported
  std::string last_error;
  RunAccounting accounting;
  RunProgress progress;

  nlohmann::json to_json() const;  // the durable part (no progress)
  static RunRecord from_json(const nlohmann::json& j, const std::string& path);
  // to_json() plus progress and derived figures (wall_s, goodput), for `linea status`.
  nlohmann::json status_json(double now) const;
};

struct SweepRecord {
  SweepSpec spec;
  std::vector<std::string> runs;  // in submission order
  bool results_written = false;
};

class RunTable {
 public:
  // Applies one event; throws std::invalid_argument naming the event and field when it is
  // malformed or does not fit the current state.
  void apply(const nlohmann::json& event);

  // Event constructors.
  static nlohmann::json submitted(const std::vector<RunSpec>& runs, const std::optional<SweepSpec>& sweep, double t);
  static nlohmann::json launched(const std::string& run, int64_t attempt, int64_t pid, double t);
  static nlohmann::json first_heartbeat(const std::string& run, int64_t attempt, double t);
  // A restarted coordinator took over the job of `attempt` (still running) instead of relaunching it.
  static nlohmann::json adopted(const std::string& run, int64_t attempt, int64_t pid, double t);
  static nlohmann::json checkpointed(const std::string& run, int64_t attempt, int64_t step, double t);
  // `give_up`: the restart budget is spent (crashed/hung only); else relaunch not before relaunch_at.
  static nlohmann::json exited(const std::string& run, int64_t attempt, ExitOutcome outcome, const std::string& detail,
                               double detected_at, double t, bool give_up, double relaunch_at);
  static nlohmann::json cancelled(const std::string& run, double t);
  // The job could not be started at all (e.g. the launcher is missing): failed, not retried.
  static nlohmann::json launch_failed(const std::string& run, int64_t attempt, const std::string& detail, double t);
  static nlohmann::json results_written(const std::string& sweep, double t);
  // One event that recreates the whole table (journal compaction).
  nlohmann::json snapshot(double t) const;

  // Non-journaled: the latest heartbeat of the current attempt.
  void record_progress(const std::string& run, const RunProgress& progress);

  RunRecord* find(std::string_view name);
  const RunRecord* find(std::string_view name) const;
  const SweepRecord* find_sweep(std::string_view name) const;
  const std::vector<std::string>& order() const { return order_; }
  const std::map<std::string, SweepRecord, std::less<>>& sweeps() const { return sweeps_; }

 private:
  RunRecord& at(const std::string& run, const std::string& where);

  std::map<std::string, RunRecord, std::less<>> runs_;
  std::vector<std::string> order_;
  std::map<std::string, SweepRecord, std::less<>> sweeps_;
};

}  // namespace linea::coordinator

#include "coordinator/coordinator.h"

#include <glog/logging.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "coordinator/job_process.h"
#include "coordinator/json_fields.h"
#include "coordinator/metrics_log.h"
#include "coordinator/protocol.h"
#include "coordinator/results.h"
#include "coordinator/run_directory.h"
#include "coordinator/token_file.h"
#include "data/atomic_file.h"

namespace linea::coordinator {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kMaxRunsPerSubmit = 100000;
constexpr const char* kStateDirVariable = "LINEA_COORDINATOR_STATE_DIR";

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

template <class T>
void require_option(bool ok, const char* option, const char* expected, T got) {
  if (!ok) {
    std::ostringstream os;
    os << option << ": expected " << expected << ", got " << got;
    throw std::invalid_argument(os.str());
  }
}

std::string this_executable() {
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("coordinator: cannot find its own executable (/proc/self/exe): " + ec.message());
  return path.string();
}

std::string advertised_host(const std::string& host) {
  if (host != "0.0.0.0" && host != "::") return host;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "127.0.0.1";
  return name;
}

}  // namespace

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

void CoordinatorOptions::validate() const {
  require_option(slots >= 1 && slots <= 100000, "--slots", "an integer in [1, 100000]", slots);
  require_option(!state_dir.empty(), "--state-dir", "a directory", "nothing");
  require_option(!token_file.empty(), "--token-file", "a file", "nothing");
  require_option(std::isfinite(heartbeat_timeout_s) && heartbeat_timeout_s > 0, "--heartbeat-timeout",
                 "a number of seconds > 0", heartbeat_timeout_s);
  require_option(std::isfinite(startup_timeout_s) && startup_timeout_s > 0, "--startup-timeout",
                 "a number of seconds > 0", startup_timeout_s);
  require_option(max_restarts >= 0 && max_restarts <= 1000000, "--max-restarts", "an integer in [0, 1000000]",
                 max_restarts);
  require_option(std::isfinite(backoff_base_s) && backoff_base_s >= 0, "--backoff", "a number of seconds >= 0",
                 backoff_base_s);
  require_option(std::isfinite(backoff_max_s) && backoff_max_s >= backoff_base_s, "--backoff-max",
                 "a number of seconds >= --backoff", backoff_max_s);
  require_option(std::isfinite(kill_grace_s) && kill_grace_s >= 0, "--kill-grace", "a number of seconds >= 0",
                 kill_grace_s);
  require_option(std::isfinite(tick_s) && tick_s > 0 && tick_s <= 10, "tick", "a number of seconds in (0, 10]", tick_s);
  if (!hostfile.empty() && !std::filesystem::is_regular_file(hostfile))
    throw std::invalid_argument("--hostfile: expected an existing file, got \"" + hostfile + "\"");
  launch.validate();
}

// A job's process as the coordinator tracks it (not journaled: a restarted coordinator kills and
// relaunches whatever was running).
struct Coordinator::LiveJob {
  pid_t pid = 0;  // also the session id
  int64_t attempt = 0;
  Clock::time_point launched;
  Clock::time_point last_heartbeat;
  bool heartbeat_seen = false;
  std::optional<ExitOutcome> teardown;  // set while tearing down: the outcome to record
  bool cancelled = false;               // torn down because the run was cancelled (already recorded)
  std::string teardown_detail;
  double teardown_detected_at = 0;
  Clock::time_point teardown_started;
  bool killed = false;  // SIGKILL sent
  // Taken over from an earlier coordinator: not our child (its end is seen as its session
  // emptying, its exit status unknown); heard_since_adoption: a heartbeat reached this coordinator.
  bool adopted = false;
  bool heard_since_adoption = false;
};

Coordinator::Coordinator(CoordinatorOptions options)
    : options_((options.validate(), std::move(options))),
      token_(read_token_file(options_.token_file)),
      journal_(options_.state_dir),
      tick_timer_(io_),
      signals_(io_) {
  if (options_.linea_binary.empty()) options_.linea_binary = this_executable();
  options_.token_file = std::filesystem::absolute(options_.token_file).string();
  options_.state_dir = std::filesystem::absolute(options_.state_dir).lexically_normal().string();
  if (journal_.dropped_partial_line())
    LOG(WARNING) << "coordinator: " << journal_.path() << ": dropped a last line cut short by a crash";
  for (size_t i = 0; i < journal_.replayed().size(); ++i) {
    try {
      table_.apply(journal_.replayed()[i]);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(journal_.path() + ":" + std::to_string(i + 1) + ": " + e.what());
    }
  }
  recover_left_running_jobs();
  journal_.compact({table_.snapshot(unix_now())});
  server_ = std::make_unique<LineServer>(io_, options_.host, options_.port, options_.limits,
                                         [this](std::string_view line) { return handle_line(line); });
  advertised_endpoint_ = Endpoint{advertised_host(options_.host), server_->port()}.to_string();
  LOG(INFO) << "coordinator: listening on " << options_.host << ":" << server_->port() << ", " << table_.order().size()
            << " runs in " << options_.state_dir;
}

Coordinator::~Coordinator() = default;

void Coordinator::run() {
  if (options_.handle_signals) {
    signals_.add(SIGINT);
    signals_.add(SIGTERM);
    signals_.async_wait([this](const boost::system::error_code& ec, int) {
      if (!ec) begin_stop();
    });
  }
  asio::post(io_, [this] { tick(); });
  io_.run();
}

void Coordinator::stop() {
  asio::post(io_, [this] { begin_stop(); });
}

void Coordinator::begin_stop() {
  if (stopping_) return;
  stopping_ = true;
  LOG(INFO) << "coordinator: stopping; " << live_.size() << " jobs to stop";
  for (auto& [name, job] : live_)
    if (!job.teardown) begin_teardown(name, ExitOutcome::interrupted, "the coordinator stopped");
}

void Coordinator::commit(const nlohmann::json& event) {
  table_.apply(event);
  journal_.append(event);
}

nlohmann::json Coordinator::handle_line(std::string_view line) {
  try {
    const Request request = parse_request(line, token_);
    switch (request.type) {
      case RequestType::submit: return handle_submit(request.body);
      case RequestType::status: return handle_status();
      case RequestType::cancel: return handle_cancel(request.body);
      case RequestType::register_worker: return handle_register(request.body);
      case RequestType::heartbeat: return handle_heartbeat(request.body);
      case RequestType::shutdown: begin_stop(); return ok_reply();
    }
    return error_reply(error_code::kMalformed, "request.type: unknown");
  } catch (const ProtocolError& e) {
    return error_reply(e.code(), e.what());
  } catch (const std::invalid_argument& e) {
    return error_reply(error_code::kMalformed, e.what());
  }
}

nlohmann::json Coordinator::handle_submit(const nlohmann::json& body) {
  if (stopping_) return error_reply(error_code::kRejected, "submit: the coordinator is stopping");
  const JsonFields f(body, "submit");
  const nlohmann::json& items = f.array("runs", kMaxRunsPerSubmit);
  if (items.empty()) f.fail("runs", "a non-empty array of runs");
  std::vector<RunSpec> runs;
  std::set<std::string> names;
  for (size_t i = 0; i < items.size(); ++i) {
    runs.push_back(RunSpec::from_json(items[i], "submit.runs[" + std::to_string(i) + "]"));
    if (table_.find(runs.back().name) || !names.insert(runs.back().name).second)
      return error_reply(error_code::kRejected, "submit.runs[" + std::to_string(i) + "].name: a run named \"" +
                                                    runs.back().name + "\" already exists");
  }
  std::optional<SweepSpec> sweep;
  if (f.has("sweep")) {
    sweep = SweepSpec::from_json(f.raw("sweep"), "submit.sweep");
    if (table_.find_sweep(sweep->name))
      return error_reply(error_code::kRejected,
                         "submit.sweep.name: a sweep named \"" + sweep->name + "\" already exists");
    if (!sweep->baseline.empty() && !names.count(sweep->baseline))
      return error_reply(error_code::kRejected, "submit.sweep.baseline: expected the name of one of its runs, got \"" +
                                                    sweep->baseline + "\"");
    for (RunSpec& r : runs) r.sweep = sweep->name;
    try {
      write_sweep_manifest(*sweep, runs);
    } catch (const std::runtime_error& e) {
      return error_reply(error_code::kRejected, std::string("submit.sweep.dir: ") + e.what());
    }
  } else {
    for (size_t i = 0; i < runs.size(); ++i)
      if (!runs[i].sweep.empty())
        return error_reply(error_code::kRejected, "submit.runs[" + std::to_string(i) +
                                                      "].sweep: expected no sweep name without a submit.sweep");
  }
  commit(RunTable::submitted(runs, sweep, unix_now()));
  LOG(INFO) << "coordinator: accepted " << runs.size() << " runs" << (sweep ? " of sweep " + sweep->name : "");
  asio::post(io_, [this] { launch_ready_runs(); });
  nlohmann::json accepted = nlohmann::json::array();
  for (const RunSpec& r : runs) accepted.push_back(r.name);
  return ok_reply({{"accepted", std::move(accepted)}});
}

nlohmann::json Coordinator::handle_status() {
  const double now = unix_now();
  nlohmann::json runs = nlohmann::json::array();
  for (const std::string& name : table_.order()) runs.push_back(table_.find(name)->status_json(now));
  return ok_reply({{"runs", std::move(runs)}, {"slots", options_.slots}, {"stopping", stopping_}});
}

nlohmann::json Coordinator::handle_cancel(const nlohmann::json& body) {
  const JsonFields f(body, "cancel");
  const std::vector<std::string> names = f.string_list("runs", kMaxRunsPerSubmit, 256);
  if (names.empty()) f.fail("runs", "a non-empty array of run names");
  for (const std::string& name : names) {
    const RunRecord* r = table_.find(name);
    if (!r) return error_reply(error_code::kRejected, "cancel.runs: no run named \"" + name + "\"");
    if (is_terminal(r->state))
      return error_reply(error_code::kRejected, "cancel.runs: run \"" + name + "\" has already ended (" +
                                                    std::string(run_state_name(r->state)) + ")");
  }
  for (const std::string& name : names) {
    if (auto it = live_.find(name); it != live_.end()) {
      it->second.cancelled = true;
      if (!it->second.teardown) begin_teardown(name, ExitOutcome::interrupted, "cancelled");
    }
    commit(RunTable::cancelled(name, unix_now()));
    write_run_summary(*table_.find(name));
  }
  return ok_reply({{"cancelled", names}});
}

nlohmann::json Coordinator::handle_register(const nlohmann::json& body) {
  const WorkerRegistration reg = WorkerRegistration::from_json(body);
  const RunRecord* r = table_.find(reg.run);
  if (!r) return error_reply(error_code::kRejected, "register.run: no run named \"" + reg.run + "\"");
  auto it = live_.find(reg.run);
  if (it == live_.end() || it->second.attempt != reg.attempt || it->second.teardown) return ok_reply({{"stale", true}});
  LOG(INFO) << "coordinator: run " << reg.run << " attempt " << reg.attempt << " registered: pid " << reg.pid << " on "
            << reg.host << ", " << reg.world_size << " ranks";
  return ok_reply();
}

nlohmann::json Coordinator::handle_heartbeat(const nlohmann::json& body) {
  const WorkerHeartbeat hb = WorkerHeartbeat::from_json(body);
  const RunRecord* r = table_.find(hb.run);
  if (!r) return error_reply(error_code::kRejected, "heartbeat.run: no run named \"" + hb.run + "\"");
  auto it = live_.find(hb.run);
  if (it == live_.end() || it->second.attempt != hb.attempt || it->second.teardown || r->state != RunState::running)
    return ok_reply({{"stale", true}});
  LiveJob& job = it->second;
  job.last_heartbeat = Clock::now();
  job.heartbeat_seen = true;
  job.heard_since_adoption = true;
  const double now = unix_now();
  if (!r->heartbeat_seen) {
    const size_t recoveries = r->accounting.recovery_s.size();
    commit(RunTable::first_heartbeat(hb.run, hb.attempt, now));
    if (r->accounting.recovery_s.size() > recoveries)
      LOG(INFO) << "coordinator: run " << hb.run << " is back " << r->accounting.recovery_s.back()
                << " s after its failure";
  }
  const Heartbeat& p = hb.progress;
  if (p.checkpoint_step > r->checkpoint_step)
    commit(RunTable::checkpointed(hb.run, hb.attempt, p.checkpoint_step, now));
  table_.record_progress(hb.run, RunProgress{p.step, p.loss, p.tokens_per_s, p.val_loss, p.checkpoint_error});
  return ok_reply();
}

void Coordinator::schedule_tick() {
  tick_timer_.expires_after(
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.tick_s)));
  tick_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) tick();
  });
}

void Coordinator::tick() {
  reap_jobs();
  enforce_timeouts();
  if (stopping_) {
    if (live_.empty()) {
      journal_.compact({table_.snapshot(unix_now())});
      server_->close();
      signals_.cancel();
      LOG(INFO) << "coordinator: stopped";
      return;  // no more ticks: io_context::run() returns once the last reply is written
    }
  } else {
    launch_ready_runs();
    write_finished_sweeps();
    if (journal_.lines() > options_.compact_after_lines) journal_.compact({table_.snapshot(unix_now())});
  }
  schedule_tick();
}

double Coordinator::backoff_s(int64_t restarts) const {
  return std::min(options_.backoff_max_s, options_.backoff_base_s * std::pow(2.0, static_cast<double>(restarts)));
}

void Coordinator::reap_jobs() {
  for (auto it = live_.begin(); it != live_.end();) {
    const std::string name = it->first;
    LiveJob& job = it->second;
    // An adopted job is not our child: it has ended when its session has no process left.
    const bool ended = job.adopted ? session_processes(job.pid).empty() : false;
    const std::optional<int> status = job.adopted ? std::optional<int>() : try_reap(job.pid);
    if (!status && !ended) {
      ++it;
      continue;
    }
    signal_session(job.pid, SIGKILL);  // whatever the job left behind (e.g. ranks of a dead mpirun)
    const RunRecord& r = *table_.find(name);
    const double now = unix_now();
    const std::string how = status ? describe_wait_status(*status)
                                   : "ended (a job adopted from an earlier coordinator: its exit status is unknown)";
    const bool exited_cleanly = status ? WIFEXITED(*status) && WEXITSTATUS(*status) == 0 : finished(r);
    // A job that stopped because it could not checkpoint said why in its last heartbeat.
    const std::string checkpoint_note = r.heartbeat_seen && !r.progress.checkpoint_error.empty()
                                            ? "; its last checkpoint failed: " + r.progress.checkpoint_error
                                            : "";
    if (job.cancelled || r.state != RunState::running || r.attempt != job.attempt) {
      LOG(INFO) << "coordinator: run " << name << " attempt " << job.attempt << " stopped: " << how;
    } else if (job.teardown && *job.teardown == ExitOutcome::hung && finished(r)) {
      // It went silent after its last step was committed (e.g. slow to leave MPI_Finalize): the
      // training is complete, so this is not a failure to relaunch.
      LOG(WARNING) << "coordinator: run " << name << " attempt " << job.attempt << " finished its training but "
                   << job.teardown_detail << " before exiting; torn down, " << how << "; counted as completed";
      commit(RunTable::exited(name, job.attempt, ExitOutcome::completed,
                              job.teardown_detail + " after finishing; " + how, now, now, false, 0));
    } else if (job.teardown) {
      const bool restart = *job.teardown == ExitOutcome::hung;
      const bool give_up = restart && r.accounting.restarts >= options_.max_restarts;
      const double relaunch_at = now + (restart ? backoff_s(r.accounting.restarts) : 0.0);
      LOG(WARNING) << "coordinator: run " << name << " attempt " << job.attempt << " torn down (" << job.teardown_detail
                   << "), " << how;
      commit(RunTable::exited(name, job.attempt, *job.teardown, job.teardown_detail + "; " + how + checkpoint_note,
                              job.teardown_detected_at, now, give_up, relaunch_at));
    } else if (exited_cleanly) {
      if (!finished(r))
        LOG(WARNING) << "coordinator: run " << name << " exited with status 0 but " << r.spec.run_dir
                     << " shows no committed checkpoint at its last step; counted as completed";
      LOG(INFO) << "coordinator: run " << name << " completed";
      commit(RunTable::exited(name, job.attempt, ExitOutcome::completed, how, now, now, false, 0));
    } else {
      const bool give_up = r.accounting.restarts >= options_.max_restarts;
      const std::string detail = how + checkpoint_note;
      LOG(WARNING) << "coordinator: run " << name << " attempt " << job.attempt << " " << detail
                   << (give_up ? "; restart budget spent, giving up" : "; relaunching");
      commit(RunTable::exited(name, job.attempt, ExitOutcome::crashed, detail, now, now, give_up,
                              now + backoff_s(r.accounting.restarts)));
    }
    const RunRecord& after = *table_.find(name);
    if (is_terminal(after.state)) write_run_summary(after);
    it = live_.erase(it);
  }
}

void Coordinator::enforce_timeouts() {
  for (auto& [name, job] : live_) {
    if (job.teardown) {
      if (!job.killed && seconds_since(job.teardown_started) >= options_.kill_grace_s) {
        signal_session(job.pid, SIGKILL);
        job.killed = true;
      }
      continue;
    }
    const double silent = seconds_since(job.heartbeat_seen ? job.last_heartbeat : job.launched);
    const double limit = job.heartbeat_seen ? options_.heartbeat_timeout_s : options_.startup_timeout_s;
    if (job.adopted && !job.heard_since_adoption && silent > limit) {
      // Not the run's fault: it reports to the earlier coordinator's address. SIGTERM makes it
      // checkpoint before it goes; the run is relaunched here at once, not charged a restart.
      begin_teardown(name, ExitOutcome::interrupted,
                     "adopted from the earlier coordinator, but no heartbeat reached this one within " +
                         std::to_string(limit) + " s (it reports to another address?)");
    } else if (silent > limit) {
      std::ostringstream detail;
      detail << (job.heartbeat_seen ? "no heartbeat for " : "no first heartbeat within ") << limit << " s";
      begin_teardown(name, ExitOutcome::hung, detail.str());
    }
  }
}

void Coordinator::begin_teardown(const std::string& run, ExitOutcome reason, const std::string& detail) {
  LiveJob& job = live_.at(run);
  job.teardown = reason;
  job.teardown_detail = detail;
  job.teardown_detected_at = unix_now();
  job.teardown_started = Clock::now();
  LOG(WARNING) << "coordinator: stopping run " << run << " attempt " << job.attempt << ": " << detail;
  if (options_.kill_grace_s == 0) {
    signal_session(job.pid, SIGKILL);
    job.killed = true;
  } else {
    signal_session(job.pid, SIGTERM);
    signal_session(job.pid, SIGCONT);  // a stopped process must run to act on SIGTERM
  }
}

void Coordinator::refresh_progress_from_metrics(RunRecord& run) {
  try {
    const MetricsLog log = read_metrics_log(run.spec.run_dir + "/metrics.jsonl");
    if (log.points.empty()) return;
    const MetricsPoint& last = log.points.back();
    std::optional<double> val_loss;
    for (const MetricsPoint& p : log.points)
      if (p.val_loss) val_loss = p.val_loss;
    run.progress =
        RunProgress{last.step, last.loss, std::isfinite(last.tokens_per_s) ? last.tokens_per_s : 0, val_loss};
  } catch (const std::runtime_error& e) {
    LOG(WARNING) << "coordinator: " << e.what();
  }
}

bool Coordinator::finished(const RunRecord& run) const {
  try {
    return run_finished(run.spec.run_dir);
  } catch (const std::runtime_error& e) {
    LOG(WARNING) << "coordinator: " << e.what();
    return false;
  }
}

void Coordinator::launch_ready_runs() {
  if (stopping_) return;
  const double now = unix_now();
  int64_t active = static_cast<int64_t>(live_.size());
  for (const std::string& name : table_.order())
    if (table_.find(name)->state == RunState::backoff && !live_.count(name)) ++active;
  for (const std::string& name : table_.order()) {
    RunRecord& r = *table_.find(name);
    const bool due = r.state == RunState::backoff && r.next_launch_at <= now && !live_.count(name);
    const bool start = r.state == RunState::queued && active < options_.slots;
    if (!due && !start) continue;
    if (finished(r)) {
      LOG(INFO) << "coordinator: run " << name << " already finished (" << r.spec.run_dir << "); not launched again";
      commit(RunTable::exited(name, r.attempt, ExitOutcome::completed, "finished before the relaunch", now, now, false,
                              0));
      write_run_summary(r);
      if (due) --active;
      continue;
    }
    if (start) ++active;
    launch(r);
  }
}

void Coordinator::launch(RunRecord& run) {
  const int64_t attempt = run.attempt + 1;
  const std::string log_dir = run.spec.run_dir + "/logs";
  char log_name[64];
  std::snprintf(log_name, sizeof log_name, "/attempt-%03lld.log", static_cast<long long>(attempt));
  JobCommand command;
  command.argv = options_.launch.expand(run.spec, attempt, options_.linea_binary, options_.hostfile);
  command.log_path = log_dir + log_name;
  command.env = {"LINEA_COORDINATOR=" + advertised_endpoint_, "LINEA_COORDINATOR_TOKEN_FILE=" + options_.token_file,
                 "LINEA_RUN_ID=" + run.spec.name, "LINEA_ATTEMPT=" + std::to_string(attempt),
                 std::string(kStateDirVariable) + "=" + options_.state_dir};
  pid_t pid = 0;
  try {
    std::error_code ec;
    std::filesystem::create_directories(log_dir, ec);
    if (ec) throw std::runtime_error("launch: cannot create " + log_dir + ": " + ec.message());
    pid = spawn_job(command);
  } catch (const std::runtime_error& e) {
    LOG(ERROR) << "coordinator: run " << run.spec.name << ": " << e.what();
    commit(RunTable::launch_failed(run.spec.name, attempt, e.what(), unix_now()));
    write_run_summary(run);
    return;
  }
  LiveJob job;
  job.pid = pid;
  job.attempt = attempt;
  job.launched = job.last_heartbeat = Clock::now();
  live_[run.spec.name] = job;
  commit(RunTable::launched(run.spec.name, attempt, pid, unix_now()));
  LOG(INFO) << "coordinator: launched run " << run.spec.name << " attempt " << attempt << " (pid " << pid << ", log "
            << command.log_path << ")";
}

void Coordinator::write_run_summary(const RunRecord& run) {
  try {
    std::filesystem::create_directories(run.spec.run_dir);
    data::write_file_atomically(run.spec.run_dir + "/coordinator.json", run.status_json(unix_now()).dump(2) + "\n");
  } catch (const std::exception& e) {
    LOG(ERROR) << "coordinator: run " << run.spec.name << ": cannot write coordinator.json: " << e.what();
  }
}

void Coordinator::write_finished_sweeps() {
  for (const auto& [name, sweep] : table_.sweeps()) {
    if (sweep.results_written) continue;
    bool ended = true;
    for (const std::string& run : sweep.runs) ended = ended && is_terminal(table_.find(run)->state);
    if (!ended) continue;
    try {
      for (const std::string& file : write_sweep_results(sweep.spec.dir))
        LOG(INFO) << "coordinator: sweep " << name << ": wrote " << file;
    } catch (const std::exception& e) {
      LOG(ERROR) << "coordinator: sweep " << name << ": cannot write results: " << e.what();
    }
    commit(RunTable::results_written(name, unix_now()));
    return;  // the table of sweeps changed; the others are looked at in the next tick
  }
}

void Coordinator::recover_left_running_jobs() {
  // Jobs of an earlier coordinator on this state directory (they carry its variable). The job of a
  // running run whose session leader still lives is adopted: supervised by its pid and heartbeats
  // (it reconnects to this coordinator on the same address). Any other of their processes is
  // stopped with SIGTERM, so that a trainer checkpoints first, and SIGKILL after kill_grace_s.
  const std::string tag = std::string(kStateDirVariable) + "=" + options_.state_dir;
  const double now = unix_now();
  std::set<pid_t> adopted_sessions;
  for (const std::string& name : table_.order()) {
    const RunRecord& r = *table_.find(name);
    if (r.state != RunState::running || r.pid <= 0 || finished(r)) continue;
    const auto leader = static_cast<pid_t>(r.pid);
    if (!process_has_environment_entry(leader, tag) || !process_has_environment_entry(leader, "LINEA_RUN_ID=" + name) ||
        !process_has_environment_entry(leader, "LINEA_ATTEMPT=" + std::to_string(r.attempt)))
      continue;
    LiveJob job;
    job.pid = leader;
    job.attempt = r.attempt;
    job.launched = job.last_heartbeat = Clock::now();
    job.heartbeat_seen = r.heartbeat_seen;
    job.adopted = true;
    live_.emplace(name, job);
    adopted_sessions.insert(leader);
    commit(RunTable::adopted(name, r.attempt, r.pid, now));
    LOG(INFO) << "coordinator: run " << name << " attempt " << r.attempt << " (pid " << r.pid
              << ") outlived the earlier coordinator; adopted";
  }
  const auto strays = [&] {
    std::vector<pid_t> left;
    for (pid_t pid : processes_with_environment_entry(tag))
      if (!adopted_sessions.count(::getsid(pid))) left.push_back(pid);
    return left;
  };
  std::vector<pid_t> left = strays();
  for (pid_t pid : left) ::kill(pid, SIGTERM);
  for (pid_t pid : left) ::kill(pid, SIGCONT);  // a stopped process must run to act on SIGTERM
  const auto grace_end =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.kill_grace_s));
  while (!left.empty() && Clock::now() < grace_end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    left = strays();
  }
  for (pid_t pid : left) ::kill(pid, SIGKILL);
  for (int i = 0; i < 500 && !left.empty(); ++i) {  // wait (at most 5 s) until they are gone
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    left = strays();
  }
  if (!left.empty()) LOG(WARNING) << "coordinator: " << left.size() << " processes of earlier jobs did not die";
  for (const std::string& name : table_.order()) {
    RunRecord& r = *table_.find(name);
    if (r.attempt >= 0) refresh_progress_from_metrics(r);
    if (r.state != RunState::running || live_.count(name)) continue;
    if (finished(r)) {
      LOG(INFO) << "coordinator: run " << name << " finished while the coordinator was away";
      commit(RunTable::exited(name, r.attempt, ExitOutcome::completed, "finished while the coordinator was away", now,
                              now, false, 0));
      write_run_summary(r);
    } else {
      LOG(INFO) << "coordinator: run " << name << " was running when the coordinator stopped; relaunching";
      commit(
          RunTable::exited(name, r.attempt, ExitOutcome::interrupted, "the coordinator stopped", now, now, false, now));
    }
  }
}

}  // namespace linea::coordinator

#include "coordinator/run_table.h"

#include <cmath>
#include <set>
#include <stdexcept>

#include "coordinator/json_fields.h"

namespace linea::coordinator {
namespace {

constexpr RunState kAllStates[] = {RunState::queued,    RunState::running, RunState::backoff,
                                   RunState::completed, RunState::failed,  RunState::cancelled};
constexpr ExitOutcome kAllOutcomes[] = {ExitOutcome::completed, ExitOutcome::crashed, ExitOutcome::hung,
                                        ExitOutcome::interrupted};
constexpr size_t kMaxRunsPerEvent = 1 << 20;
constexpr int64_t kMaxCount = int64_t{1} << 40;

template <class Enum, size_t N, class NameOf>
Enum parse_enum(const JsonFields& f, std::string_view key, const Enum (&all)[N], NameOf name_of) {
  const std::string name = f.required_string(key, 64);
  for (Enum e : all)
    if (name == name_of(e)) return e;
  std::string expected = "one of";
  for (Enum e : all) expected += std::string(" ") + std::string(name_of(e));
  f.fail(key, expected);
}

double time_field(const JsonFields& f, std::string_view key) {
  const double t = f.required_number(key);
  if (t < 0) f.fail(key, "a time in Unix seconds >= 0");
  return t;
}

nlohmann::json accounting_to_json(const RunAccounting& a) {
  return {{"first_launch_at", a.first_launch_at},
          {"ended_at", a.ended_at},
          {"classified_until", a.classified_until},
          {"productive_s", a.productive_s},
          {"lost_s", a.lost_s},
          {"restarts", a.restarts},
          {"interruptions", a.interruptions},
          {"adoptions", a.adoptions},
          {"failure_at", a.failure_at},
          {"recovery_s", a.recovery_s}};
}

RunAccounting accounting_from_json(const JsonFields& f) {
  RunAccounting a;
  a.first_launch_at = time_field(f, "first_launch_at");
  a.ended_at = time_field(f, "ended_at");
  a.classified_until = time_field(f, "classified_until");
  a.productive_s = time_field(f, "productive_s");
  a.lost_s = time_field(f, "lost_s");
  a.restarts = f.required_integer("restarts", 0, kMaxCount);
  a.interruptions = f.required_integer("interruptions", 0, kMaxCount);
  a.adoptions = f.integer("adoptions", 0, 0, kMaxCount);  // absent in journals of older versions
  a.failure_at = time_field(f, "failure_at");
  const nlohmann::json& recovery = f.array("recovery_s", kMaxCount);
  for (const auto& r : recovery) {
    if (!r.is_number() || !std::isfinite(r.get<double>()))
      throw std::invalid_argument(f.field_path("recovery_s") + ": expected finite numbers");
    a.recovery_s.push_back(r.get<double>());
  }
  return a;
}

// Moves the time from classified_until to t into one bucket.
void classify(RunAccounting& a, double t, double RunAccounting::*bucket) {
  if (a.classified_until > 0 && t > a.classified_until) a.*bucket += t - a.classified_until;
  if (a.classified_until > 0) a.classified_until = std::max(a.classified_until, t);
}

}  // namespace

std::string_view run_state_name(RunState state) {
  switch (state) {
    case RunState::queued: return "queued";
    case RunState::running: return "running";
    case RunState::backoff: return "backoff";
    case RunState::completed: return "completed";
    case RunState::failed: return "failed";
    case RunState::cancelled: return "cancelled";
  }
  return "?";
}

bool is_terminal(RunState state) {
  return state == RunState::completed || state == RunState::failed || state == RunState::cancelled;
}

std::string_view exit_outcome_name(ExitOutcome outcome) {
  switch (outcome) {
    case ExitOutcome::completed: return "completed";
    case ExitOutcome::crashed: return "crashed";
    case ExitOutcome::hung: return "hung";
    case ExitOutcome::interrupted: return "interrupted";
  }
  return "?";
}

double RunAccounting::wall_s(double now, bool active) const {
  const double open = active && classified_until > 0 ? std::max(0.0, now - classified_until) : 0.0;
  return productive_s + lost_s + open;
}

double RunAccounting::goodput() const {
  const double total = productive_s + lost_s;
  return total > 0 ? productive_s / total : 1.0;
}

nlohmann::json RunRecord::to_json() const {
  return {{"spec", spec.to_json()},
          {"state", run_state_name(state)},
          {"attempt", attempt},
          {"pid", pid},
          {"heartbeat_seen", heartbeat_seen},
          {"next_launch_at", next_launch_at},
          {"checkpoint_step", checkpoint_step},
          {"last_error", last_error},
          {"accounting", accounting_to_json(accounting)}};
}

RunRecord RunRecord::from_json(const nlohmann::json& j, const std::string& path) {
  const JsonFields f(j, path);
  RunRecord r;
  r.spec = RunSpec::from_json(f.raw("spec"), f.field_path("spec"));
  r.state = parse_enum(f, "state", kAllStates, run_state_name);
  r.attempt = f.required_integer("attempt", -1, kMaxCount);
  r.pid = f.required_integer("pid", 0, int64_t{1} << 31);
  r.heartbeat_seen = f.boolean("heartbeat_seen", false);
  r.next_launch_at = time_field(f, "next_launch_at");
  r.checkpoint_step = f.required_integer("checkpoint_step", -1, int64_t{1} << 53);
  r.last_error = f.string("last_error", "", 1 << 16);
  r.accounting = accounting_from_json(f.object("accounting"));
  return r;
}

nlohmann::json RunRecord::status_json(double now) const {
  nlohmann::json j = to_json();
  const bool active = state == RunState::running || state == RunState::backoff;
  j["wall_s"] = accounting.wall_s(now, active);
  j["goodput"] = accounting.goodput();
  j["step"] = progress.step;
  j["loss"] = progress.loss;
  j["tokens_per_s"] = progress.tokens_per_s;
  if (progress.val_loss) j["val_loss"] = *progress.val_loss;
  if (!progress.checkpoint_error.empty()) j["checkpoint_error"] = progress.checkpoint_error;
  return j;
}

nlohmann::json RunTable::submitted(const std::vector<RunSpec>& runs, const std::optional<SweepSpec>& sweep, double t) {
  nlohmann::json specs = nlohmann::json::array();
  for (const RunSpec& r : runs) specs.push_back(r.to_json());
  nlohmann::json e = {{"event", "submit"}, {"t", t}, {"runs", std::move(specs)}};
  if (sweep) e["sweep"] = sweep->to_json();
  return e;
}

nlohmann::json RunTable::launched(const std::string& run, int64_t attempt, int64_t pid, double t) {
  return {{"event", "launch"}, {"t", t}, {"run", run}, {"attempt", attempt}, {"pid", pid}};
}

nlohmann::json RunTable::first_heartbeat(const std::string& run, int64_t attempt, double t) {
  return {{"event", "first_heartbeat"}, {"t", t}, {"run", run}, {"attempt", attempt}};
}

nlohmann::json RunTable::adopted(const std::string& run, int64_t attempt, int64_t pid, double t) {
  return {{"event", "adopt"}, {"t", t}, {"run", run}, {"attempt", attempt}, {"pid", pid}};
}

nlohmann::json RunTable::checkpointed(const std::string& run, int64_t attempt, int64_t step, double t) {
  return {{"event", "checkpoint"}, {"t", t}, {"run", run}, {"attempt", attempt}, {"step", step}};
}

nlohmann::json RunTable::exited(const std::string& run, int64_t attempt, ExitOutcome outcome, const std::string& detail,
                                double detected_at, double t, bool give_up, double relaunch_at) {
  return {{"event", "exit"},
          {"t", t},
          {"run", run},
          {"attempt", attempt},
          {"outcome", exit_outcome_name(outcome)},
          {"detail", detail},
          {"detected_at", detected_at},
          {"give_up", give_up},
          {"relaunch_at", relaunch_at}};
}

nlohmann::json RunTable::cancelled(const std::string& run, double t) {
  return {{"event", "cancel"}, {"t", t}, {"run", run}};
}

nlohmann::json RunTable::launch_failed(const std::string& run, int64_t attempt, const std::string& detail, double t) {
  return {{"event", "launch_failed"}, {"t", t}, {"run", run}, {"attempt", attempt}, {"detail", detail}};
}

nlohmann::json RunTable::results_written(const std::string& sweep, double t) {
  return {{"event", "results"}, {"t", t}, {"sweep", sweep}};
}

nlohmann::json RunTable::snapshot(double t) const {
  nlohmann::json runs = nlohmann::json::array();
  for (const std::string& name : order_) runs.push_back(runs_.at(name).to_json());
  nlohmann::json sweeps = nlohmann::json::array();
  for (const auto& [name, s] : sweeps_)
    sweeps.push_back({{"spec", s.spec.to_json()}, {"runs", s.runs}, {"results_written", s.results_written}});
  return {{"event", "snapshot"}, {"t", t}, {"runs", std::move(runs)}, {"sweeps", std::move(sweeps)}};
}

RunRecord* RunTable::find(std::string_view name) {
  auto it = runs_.find(name);
  return it == runs_.end() ? nullptr : &it->second;
}

const RunRecord* RunTable::find(std::string_view name) const {
  auto it = runs_.find(name);
  return it == runs_.end() ? nullptr : &it->second;
}

const SweepRecord* RunTable::find_sweep(std::string_view name) const {
  auto it = sweeps_.find(name);
  return it == sweeps_.end() ? nullptr : &it->second;
}

RunRecord& RunTable::at(const std::string& run, const std::string& where) {
  RunRecord* r = find(run);
  if (!r) throw std::invalid_argument(where + ".run: no run named \"" + run + "\"");
  return *r;
}

void RunTable::record_progress(const std::string& run, const RunProgress& progress) {
  if (RunRecord* r = find(run)) r->progress = progress;
}

void RunTable::apply(const nlohmann::json& event) {
  const JsonFields f(event, "event");
  const std::string kind = f.required_string("event", 64);
  const std::string where = "event " + kind;
  const JsonFields e(event, where);
  const double t = time_field(e, "t");

  if (kind == "snapshot") {
    RunTable fresh;
    const nlohmann::json& runs = e.array("runs", kMaxRunsPerEvent);
    for (size_t i = 0; i < runs.size(); ++i) {
      RunRecord r = RunRecord::from_json(runs[i], where + ".runs[" + std::to_string(i) + "]");
      if (fresh.find(r.spec.name)) throw std::invalid_argument(where + ": run \"" + r.spec.name + "\" appears twice");
      fresh.order_.push_back(r.spec.name);
      fresh.runs_.emplace(r.spec.name, std::move(r));
    }
    const nlohmann::json& sweeps = e.array("sweeps", kMaxRunsPerEvent);
    for (size_t i = 0; i < sweeps.size(); ++i) {
      const JsonFields s(sweeps[i], where + ".sweeps[" + std::to_string(i) + "]");
      SweepRecord record{SweepSpec::from_json(s.raw("spec"), s.field_path("spec")),
                         s.string_list("runs", kMaxRunsPerEvent), s.boolean("results_written", false)};
      for (const std::string& run : record.runs)
        if (!fresh.find(run)) throw std::invalid_argument(s.field_path("runs") + ": no run named \"" + run + "\"");
      fresh.sweeps_[record.spec.name] = std::move(record);
    }
    *this = std::move(fresh);
    return;
  }

  if (kind == "submit") {
    const nlohmann::json& runs = e.array("runs", kMaxRunsPerEvent);
    std::vector<RunSpec> specs;
    std::set<std::string> names;
    for (size_t i = 0; i < runs.size(); ++i) {
      specs.push_back(RunSpec::from_json(runs[i], where + ".runs[" + std::to_string(i) + "]"));
      const std::string& name = specs.back().name;
      if (find(name) || !names.insert(name).second)
        throw std::invalid_argument(where + ".runs[" + std::to_string(i) + "].name: a run named \"" + name +
                                    "\" already exists");
    }
    std::optional<SweepSpec> sweep;
    if (e.has("sweep")) {
      sweep = SweepSpec::from_json(e.raw("sweep"), where + ".sweep");
      if (find_sweep(sweep->name))
        throw std::invalid_argument(where + ".sweep.name: a sweep named \"" + sweep->name + "\" already exists");
    }
    SweepRecord* sweep_record = nullptr;
    if (sweep) {
      sweep_record = &sweeps_[sweep->name];
      sweep_record->spec = *sweep;
    }
    for (RunSpec& spec : specs) {
      if (sweep) {
        spec.sweep = sweep->name;
        sweep_record->runs.push_back(spec.name);
      }
      order_.push_back(spec.name);
      RunRecord record;
      record.spec = std::move(spec);
      runs_.emplace(record.spec.name, std::move(record));
    }
    return;
  }

  if (kind == "results") {
    auto it = sweeps_.find(e.required_string("sweep", 256));
    if (it == sweeps_.end()) e.fail("sweep", "the name of a submitted sweep");
    it->second.results_written = true;
    return;
  }

  RunRecord& r = at(e.required_string("run", 256), where);
  RunAccounting& a = r.accounting;
  auto require_state = [&](bool ok, std::string_view expected) {
    if (!ok)
      throw std::invalid_argument(where + ": run \"" + r.spec.name + "\" is " + std::string(run_state_name(r.state)) +
                                  ", expected " + std::string(expected));
  };
  auto require_attempt = [&](int64_t attempt) {
    if (attempt != r.attempt)
      throw std::invalid_argument(where + ": run \"" + r.spec.name + "\" attempt " + std::to_string(attempt) +
                                  ", expected the current attempt " + std::to_string(r.attempt));
  };

  if (kind == "cancel") {
    require_state(!is_terminal(r.state), "not finished");
    classify(a, t, &RunAccounting::lost_s);
    r.state = RunState::cancelled;
    r.pid = 0;
    if (a.first_launch_at > 0) a.ended_at = t;
    return;
  }

  const int64_t attempt = e.required_integer("attempt", -1, kMaxCount);
  if (kind == "launch_failed") {
    require_state(r.state == RunState::queued || r.state == RunState::backoff, "queued or in backoff");
    classify(a, t, &RunAccounting::lost_s);
    r.state = RunState::failed;
    r.last_error = e.string("detail", "", 1 << 16);
    a.ended_at = t;
    return;
  }
  if (kind == "launch") {
    require_state(r.state == RunState::queued || r.state == RunState::backoff, "queued or in backoff");
    if (attempt != r.attempt + 1)
      throw std::invalid_argument(where + ".attempt: expected " + std::to_string(r.attempt + 1) + ", got " +
                                  std::to_string(attempt));
    r.attempt = attempt;
    r.pid = e.required_integer("pid", 1, int64_t{1} << 31);
    r.state = RunState::running;
    r.heartbeat_seen = false;
    if (a.first_launch_at == 0) a.first_launch_at = a.classified_until = t;
  } else if (kind == "first_heartbeat") {
    require_state(r.state == RunState::running, "running");
    require_attempt(attempt);
    r.heartbeat_seen = true;
    if (a.failure_at > 0) {
      classify(a, t, &RunAccounting::lost_s);
      a.recovery_s.push_back(t - a.failure_at);
      a.failure_at = 0;
    }
  } else if (kind == "adopt") {
    require_state(r.state == RunState::running, "running");
    require_attempt(attempt);
    if (e.required_integer("pid", 1, INT32_MAX) != r.pid) e.fail("pid", "the pid of the attempt's job");
    ++a.adoptions;  // the job trained on: its time stays in the buckets its checkpoints put it in
  } else if (kind == "checkpoint") {
    require_state(r.state == RunState::running, "running");
    require_attempt(attempt);
    r.checkpoint_step = std::max(r.checkpoint_step, e.required_integer("step", 0, int64_t{1} << 53));
    classify(a, t, &RunAccounting::productive_s);
  } else if (kind == "exit") {
    require_state(r.state == RunState::running || r.state == RunState::queued || r.state == RunState::backoff,
                  "running, queued or in backoff");
    require_attempt(attempt);
    const ExitOutcome outcome = parse_enum(e, "outcome", kAllOutcomes, exit_outcome_name);
    if (outcome != ExitOutcome::completed) require_state(r.state == RunState::running, "running");
    const std::string detail = e.string("detail", "", 1 << 16);
    const double detected_at = time_field(e, "detected_at");
    r.pid = 0;
    if (outcome == ExitOutcome::completed) {
      classify(a, t, r.state == RunState::running ? &RunAccounting::productive_s : &RunAccounting::lost_s);
      a.failure_at = 0;
      r.state = RunState::completed;
      a.ended_at = t;
      return;
    }
    classify(a, t, &RunAccounting::lost_s);
    a.failure_at = detected_at;
    r.last_error = detail;
    r.next_launch_at = time_field(e, "relaunch_at");
    if (outcome == ExitOutcome::interrupted) {
      ++a.interruptions;
      r.state = RunState::backoff;
    } else if (e.boolean("give_up", false)) {
      r.state = RunState::failed;
      a.ended_at = t;
    } else {
      ++a.restarts;
      r.state = RunState::backoff;
    }
  } else {
    throw std::invalid_argument(
        "event.event: expected submit, launch, launch_failed, first_heartbeat, adopt, checkpoint, "
        "exit, cancel, results or snapshot, got \"" +
        kind + "\"");
  }
}

}  // namespace linea::coordinator

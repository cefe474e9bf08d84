// bench_recovery: how long a 2-rank training job under the coordinator takes from the death of a
// rank to training again.
// Usage: bench_recovery [CONFIG=configs/default.toml] [TRIALS=3] [BACKOFF_S=0] [key=value ...]
// Each trial starts a fresh `linea coordinator` (the `linea` beside this program; --backoff
// BACKOFF_S, the default heartbeat timeout) in a temporary directory and submits CONFIG as a 2-rank
// data-parallel job: `mpirun -np 2 linea train CONFIG train.checkpoint_every=2
// train.micro_batch_seqs=8 key=value...` (each rank takes 8 of the default job's 16 sequences a
// step). Once the first checkpoint has committed and the step after it is logged, rank 1 gets
// SIGKILL; mpirun ends the job, the coordinator relaunches it, and the relaunch resumes from that
// checkpoint. The trial ends at the relaunched attempt's first heartbeat, which the trainer sends
// right after logging its first step; the run is then cancelled. Times come from the coordinator's
// journal (tests/testing/coordinator_process.h), in seconds after the kill: detected_s (the job's
// end seen), relaunched_s, resumed_s (training again). start_s is the first attempt's launch → first
// heartbeat, for scale. Prints one JSON line per trial, then one with the minimum and median of
// resumed_s.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "checkpoint/checkpoint_directory.h"
#include "coordinator/coordinator.h"
#include "tests/testing/coordinator_process.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

struct Options {
  fs::path config = "configs/default.toml";
  int trials = 3;
  double backoff_s = 0;
  std::vector<std::string> overrides;
};

Options parse_options(int argc, char** argv) {
  Options o;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    (word.find('=') == std::string::npos ? positional : o.overrides).push_back(word);
  }
  if (positional.size() > 3) throw std::invalid_argument("expected at most CONFIG TRIALS BACKOFF_S before key=value");
  if (positional.size() > 0) o.config = positional[0];
  if (positional.size() > 1) o.trials = static_cast<int>(linea::bench::parse_count("TRIALS", positional[1]));
  if (positional.size() > 2) o.backoff_s = std::stod(positional[2]);
  if (!fs::is_regular_file(o.config)) throw std::invalid_argument("CONFIG: no file " + o.config.string());
  o.config = fs::absolute(o.config);
  return o;
}

json trial(const Options& o, const fs::path& linea, const fs::path& dir) {
  const fs::path run_dir = dir / "runs" / "recovery";
  linea::testing::CoordinatorProcess coordinator(linea.string(), dir / "state",
                                                 {"--backoff", std::to_string(o.backoff_s), "--kill-grace", "1"});
  std::vector<std::string> overrides = {"run.dir=" + (dir / "runs").string(), "run.name=recovery",
                                        "train.checkpoint_every=2", "train.micro_batch_seqs=8"};
  overrides.insert(overrides.end(), o.overrides.begin(), o.overrides.end());
  coordinator.request({{"type", "submit"},
                       {"runs",
                        {{{"name", "recovery"},
                          {"config", o.config.string()},
                          {"overrides", overrides},
                          {"run_dir", run_dir.string()},
                          {"processes", 2}}}}});

  const pid_t rank1 = linea::testing::job_rank_pid(coordinator, "recovery", 0, 1, 300s);
  int64_t committed = -1;
  coordinator.wait_for(
      "recovery",
      [&](const json&) {
        const auto checkpoints = linea::list_committed_checkpoints(run_dir / "checkpoints");
        committed = checkpoints.empty() ? -1 : checkpoints.back().step;
        return committed > 0 && linea::testing::logged_steps(run_dir / "metrics.jsonl") > committed;
      },
      600s, "past its first checkpoint");
  const double killed_at = linea::coordinator::unix_now();
  ::kill(rank1, SIGKILL);
  const int64_t killed_after = linea::testing::logged_steps(run_dir / "metrics.jsonl");

  std::optional<linea::testing::RecoveryTimes> times;
  coordinator.wait_for(
      "recovery",
      [&](const json&) {
        return (times = linea::testing::recovery_times(coordinator, "recovery", 0, killed_at)).has_value();
      },
      600s, "training again after the kill");
  coordinator.request({{"type", "cancel"}, {"runs", {"recovery"}}});
  double start_s = 0;
  for (const json& e : coordinator.journal()) {
    if (e.value("attempt", -1) != 0) continue;
    if (e["event"] == "launch") start_s -= e["t"].get<double>();
    if (e["event"] == "first_heartbeat") start_s += e["t"].get<double>();
  }
  return {{"bench", "recovery"},
          {"config", o.config.string()},
          {"backoff_s", o.backoff_s},
          {"killed_after_step", killed_after},
          {"checkpoint_step", committed},
          {"outcome", times->outcome},
          {"detected_s", times->detected_s},
          {"relaunched_s", times->relaunched_s},
          {"resumed_s", times->resumed_s},
          {"start_s", start_s}};
}

int run(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  const fs::path linea = fs::read_symlink("/proc/self/exe").parent_path() / "linea";
  if (!fs::is_regular_file(linea)) throw std::runtime_error("no linea binary beside this program: " + linea.string());
  std::vector<double> resumed;
  for (int t = 0; t < o.trials; ++t) {
    const fs::path dir = fs::temp_directory_path() / ("linea-bench-recovery-" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const json line = trial(o, linea, dir);
    fs::remove_all(dir);
    resumed.push_back(line["resumed_s"].get<double>());
    linea::bench::print_json_line(line);
  }
  std::sort(resumed.begin(), resumed.end());
  linea::bench::print_json_line({{"bench", "recovery_summary"},
                                 {"trials", o.trials},
                                 {"resumed_s_min", resumed.front()},
                                 {"resumed_s_median", resumed[resumed.size() / 2]}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return linea::bench::main_reporting_errors("bench_recovery", run, argc, argv); }

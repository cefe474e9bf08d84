// Sweep results. When a sweep is submitted the coordinator writes SWEEP_DIR/sweep.json (its name,
// baseline and runs in order); when a run ends it writes RUN_DIR/coordinator.json (state, restarts,
// time accounting). write_sweep_results() reads those and each RUN_DIR/metrics.jsonl and writes,
// each atomically, into SWEEP_DIR:
//   summary.md, summary.csv  one row per run: state, steps, final loss, final val loss, tokens/s
//                            (median over the second half of the logged steps, past warm-up),
//                            throughput normalized to the baseline run, iteration time (median
//                            over the same steps of step_time_s, or of tokens per step over
//                            tokens_per_s), restarts, goodput, wall time;
//                            and, when sweep.json lists comparisons ([[sweep.compare]]), a second
//                            table: each run's final val loss against its matched baseline's, the
//                            difference, and the effect the source reported;
//   loss.svg, val_loss.svg   loss curves of every run against the step (val_loss.svg only when
//                            some run logged a val_loss).
// `linea results SWEEP_DIR` calls the same function, so tables can be rebuilt at any time.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/run_spec.h"

namespace linea::coordinator {

struct RunResult {
  std::string name;
  std::string state;  // from coordinator.json; "unknown" when the coordinator wrote none
  int64_t steps = 0;  // the last logged step
  std::optional<double> final_loss;
  std::optional<double> final_val_loss;
  std::optional<double> tokens_per_s;
  std::optional<double> normalized_throughput;  // tokens_per_s / the baseline's
  std::optional<double> iteration_time_s;
  int64_t restarts = 0;
  std::optional<double> goodput;
  std::optional<double> wall_s;
};

// A comparison of the sweep with both runs' final val losses and their difference (run − baseline),
// each absent when a run has logged no val loss.
struct ComparisonResult {
  SweepComparison comparison;
  std::optional<double> val_loss, baseline_val_loss, difference;
};

// Writes SWEEP_DIR/sweep.json; refuses (std::runtime_error) when one is already there, since that
// directory holds another sweep's results.
void write_sweep_manifest(const SweepSpec& sweep, const std::vector<RunSpec>& runs);

// Reads SWEEP_DIR/sweep.json and every run's files; errors name the file.
std::vector<RunResult> collect_sweep_results(const std::string& sweep_dir);
std::string format_results_markdown(const std::string& sweep_name, const std::vector<RunResult>& results);
std::string format_results_csv(const std::vector<RunResult>& results);
std::vector<ComparisonResult> compare_with_baselines(const std::vector<SweepComparison>& comparisons,
                                                     const std::vector<RunResult>& results);
std::string format_comparisons_markdown(const std::vector<ComparisonResult>& comparisons);
// Collects and writes every file listed above; returns the paths written.
std::vector<std::string> write_sweep_results(const std::string& sweep_dir);

}  // namespace linea::coordinator

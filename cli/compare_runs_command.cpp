// `linea compare-runs REFERENCE_DIR RUN_DIR... [--tolerance R]`: does each run follow the
// reference run's loss trajectory (coordinator/loss_comparison.h)? One JSON line per run; the exit
// status is 0 when every run is within the tolerance, 1 when one is not (or a log is unreadable or
// logged other steps).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "cli/command_line.h"
#include "coordinator/loss_comparison.h"

namespace linea::cli {
namespace {

constexpr const char* kUsage =
    "usage: linea compare-runs REFERENCE_DIR RUN_DIR... [--tolerance R]\n"
    "\n"
    "Compares the training loss that each RUN_DIR/metrics.jsonl logged at every step with\n"
    "REFERENCE_DIR/metrics.jsonl: both must have logged the same steps, and a run passes when\n"
    "|loss - reference loss| <= R * |reference loss| at every step (default R = 2e-4, f32 rounding\n"
    "over 20 steps). Prints one JSON line per run: reference, run, steps, max_abs_dloss,\n"
    "max_rel_dloss, worst_step, final_loss, final_abs_dloss, tolerance, pass. Exit status 0 when\n"
    "every run passes, else 1.\n";

int run_compare_runs(int argc, char** argv) {
  CommandLine flags("compare-runs", kUsage);
  flags.option("tolerance").positional(2, CommandLine::kAny);
  if (const auto done = flags.parse(argc, argv)) return *done;
  const double tolerance = flags.number("tolerance", 2e-4, 0, 1);
  const std::string& reference_dir = flags.positional()[0];
  const coordinator::MetricsLog reference = coordinator::read_metrics_log(reference_dir + "/metrics.jsonl");
  bool all_pass = true;
  for (size_t i = 1; i < flags.positional().size(); ++i) {
    const std::string& run_dir = flags.positional()[i];
    const coordinator::LossComparison c = coordinator::compare_losses(
        reference, coordinator::read_metrics_log(run_dir + "/metrics.jsonl"), tolerance, reference_dir, run_dir);
    const nlohmann::json line = {{"reference", reference_dir},
                                 {"run", run_dir},
                                 {"steps", c.steps},
                                 {"max_abs_dloss", c.max_abs_diff},
                                 {"max_rel_dloss", c.max_rel_diff},
                                 {"worst_step", c.worst_step},
                                 {"final_loss", c.final_loss},
                                 {"final_abs_dloss", c.final_abs_diff},
                                 {"tolerance", tolerance},
                                 {"pass", c.pass}};
    std::printf("%s\n", line.dump().c_str());
    all_pass = all_pass && c.pass;
  }
  return all_pass ? 0 : 1;
}

const CommandRegistration registration({"compare-runs", "do runs follow a reference run's loss, step by step?",
                                        run_compare_runs});

}  // namespace
}  // namespace linea::cli

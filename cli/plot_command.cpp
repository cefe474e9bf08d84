// `linea plot RUN_DIR [OUT.svg]`: the loss curves (training loss and val_loss against the step) of
// one run, from RUN_DIR/metrics.jsonl, as an SVG (default RUN_DIR/loss.svg).
#include <cstdio>
#include <filesystem>
#include <string>

#include "cli/command.h"
#include "cli/command_line.h"
#include "coordinator/metrics_log.h"
#include "coordinator/svg_plot.h"
#include "data/atomic_file.h"

namespace linea::cli {
namespace {

constexpr const char* kUsage =
    "usage: linea plot RUN_DIR [OUT.svg]\n"
    "\n"
    "Draws the training loss and the validation loss of the run in RUN_DIR (its metrics.jsonl)\n"
    "against the step, as an SVG written to OUT.svg (default RUN_DIR/loss.svg).\n";

int run_plot(int argc, char** argv) {
  CommandLine flags("plot", kUsage);
  if (const auto done = flags.positional(1, 2).parse(argc, argv)) return *done;
  const std::string run_dir = flags.positional()[0];
  const std::string out = flags.positional().size() == 2 ? flags.positional()[1] : run_dir + "/loss.svg";
  if (!std::filesystem::is_directory(run_dir)) throw std::runtime_error(run_dir + ": no such run directory");
  if (!std::filesystem::exists(run_dir + "/metrics.jsonl")) {
    throw std::runtime_error(run_dir + "/metrics.jsonl: no such file (has the run logged a step yet?)");
  }
  const coordinator::MetricsLog log = coordinator::read_metrics_log(run_dir + "/metrics.jsonl");
  if (log.points.empty()) throw std::runtime_error(run_dir + "/metrics.jsonl: no logged steps");
  coordinator::PlotSeries train{"loss", {}, {}}, val{"val_loss", {}, {}};
  for (const coordinator::MetricsPoint& p : log.points) {
    train.x.push_back(double(p.step));
    train.y.push_back(p.loss);
    if (p.val_loss) {
      val.x.push_back(double(p.step));
      val.y.push_back(*p.val_loss);
    }
  }
  std::vector<coordinator::PlotSeries> series{train};
  if (!val.x.empty()) series.push_back(val);
  data::write_file_atomically(out, coordinator::render_line_plot({run_dir, "step", "cross-entropy (nats)"}, series));
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

const CommandRegistration registration({"plot", "draw a run's loss curves (SVG)", run_plot});

}  // namespace
}  // namespace linea::cli

// `linea throughput RUN_DIR... [--warmup N]`: each run's training speed after N warm-up steps
// (coordinator/steady_throughput.h), one JSON line per run.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "cli/command_line.h"
#include "coordinator/steady_throughput.h"

namespace linea::cli {
namespace {

constexpr const char* kUsage =
    "usage: linea throughput RUN_DIR... [--warmup N]\n"
    "\n"
    "The training speed of each run after its first N steps (default 2), from RUN_DIR/metrics.jsonl:\n"
    "the tokens of the later steps (all ranks together) over the sum of their step times. Prints one\n"
    "JSON line per run: run, steps, tokens, seconds, tokens_per_s, mean_step_s.\n";

int run_throughput(int argc, char** argv) {
  CommandLine flags("throughput", kUsage);
  flags.option("warmup").positional(1, CommandLine::kAny);
  if (const auto done = flags.parse(argc, argv)) return *done;
  const int64_t warmup = flags.integer("warmup", 2, 0, 1'000'000'000);
  for (const std::string& run_dir : flags.positional()) {
    const coordinator::SteadyThroughput t =
        coordinator::steady_throughput(coordinator::read_metrics_log(run_dir + "/metrics.jsonl"), warmup, run_dir);
    const nlohmann::json line = {{"run", run_dir},
                                 {"steps", t.steps},
                                 {"tokens", t.tokens},
                                 {"seconds", t.seconds},
                                 {"tokens_per_s", t.tokens_per_s},
                                 {"mean_step_s", t.mean_step_s}};
    std::printf("%s\n", line.dump().c_str());
  }
  return 0;
}

const CommandRegistration registration({"throughput", "a run's tokens/s after its warm-up steps", run_throughput});

}  // namespace
}  // namespace linea::cli

// `linea submit SWEEP.toml`: expands a sweep file into runs (coordinator/sweep.h) and queues them.
#include <cstdio>

#include "cli/command.h"
#include "cli/command_line.h"
#include "cli/coordinator_connection.h"
#include "coordinator/sweep.h"

namespace linea::cli {
namespace {

const std::string kUsage = std::string(
                               "usage: linea submit SWEEP.toml [--dry-run] [options]\n"
                               "\n"
                               "Expands the sweep (the product of the values under [sweep.grid]) into runs and sends\n"
                               "them to the coordinator. --dry-run prints the runs without sending them.\n"
                               "\n"
                               "options:\n"
                               "  --dry-run                print the runs only\n") +
                           kConnectionOptionsHelp;

int run_submit(int argc, char** argv) {
  CommandLine flags("submit", kUsage);
  if (const auto done = with_connection_options(flags).flag("dry-run").positional(1, 1).parse(argc, argv)) return *done;
  const coordinator::SweepPlan plan = coordinator::expand_sweep_file(flags.positional().front());
  std::printf("sweep %s: %zu runs into %s\n", plan.sweep.name.c_str(), plan.runs.size(), plan.sweep.dir.c_str());
  for (const auto& run : plan.runs) {
    std::printf("  %-48s np=%lld %s", run.name.c_str(), static_cast<long long>(run.processes), run.config.c_str());
    for (const auto& o : run.overrides) std::printf(" %s", o.c_str());
    std::printf("\n");
  }
  if (flags.has("dry-run")) return 0;
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& run : plan.runs) runs.push_back(run.to_json());
  const nlohmann::json reply = CoordinatorConnection::from_flags(flags).request(
      {{"type", "submit"}, {"runs", std::move(runs)}, {"sweep", plan.sweep.to_json()}});
  std::printf("submitted %zu runs\n", reply.value("accepted", nlohmann::json::array()).size());
  return 0;
}

const CommandRegistration registration({"submit", "queue a sweep's runs on the coordinator", run_submit});

}  // namespace
}  // namespace linea::cli

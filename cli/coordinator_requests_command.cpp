// `linea cancel RUN...` and `linea shutdown`: the two one-line requests to a running coordinator.
#include <cstdio>

#include "cli/command.h"
#include "cli/command_line.h"
#include "cli/coordinator_connection.h"

namespace linea::cli {
namespace {

int run_cancel(int argc, char** argv) {
  const std::string usage = std::string(
                                "usage: linea cancel RUN... [options]\n\n"
                                "Cancels queued or running runs (a running job is stopped; its checkpoints stay).\n\n"
                                "options:\n") +
                            kConnectionOptionsHelp;
  CommandLine flags("cancel", usage);
  if (const auto done = with_connection_options(flags).positional(1, CommandLine::kAny).parse(argc, argv)) return *done;
  const nlohmann::json reply =
      CoordinatorConnection::from_flags(flags).request({{"type", "cancel"}, {"runs", flags.positional()}});
  for (const auto& name : reply.value("cancelled", nlohmann::json::array()))
    std::printf("cancelled %s\n", name.get<std::string>().c_str());
  return 0;
}

int run_shutdown(int argc, char** argv) {
  const std::string usage = std::string(
                                "usage: linea shutdown [options]\n\n"
                                "Stops the coordinator. Running jobs are stopped and relaunched (from their last\n"
                                "checkpoint) when a coordinator starts again on the same state directory.\n\n"
                                "options:\n") +
                            kConnectionOptionsHelp;
  CommandLine flags("shutdown", usage);
  if (const auto done = with_connection_options(flags).parse(argc, argv)) return *done;
  CoordinatorConnection::from_flags(flags).request({{"type", "shutdown"}});
  std::printf("the coordinator is stopping\n");
  return 0;
}

const CommandRegistration cancel_registration({"cancel", "cancel runs on the coordinator", run_cancel});
const CommandRegistration shutdown_registration({"shutdown", "stop the coordinator (its state is kept)", run_shutdown});

}  // namespace
}  // namespace linea::cli

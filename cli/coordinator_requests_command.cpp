// `linea cancel RUN...` and `linea shutdown`: the two one-line requests to a running coordinator.
#include <cstdio>
#include <cstring>

#include "cli/command.h"
#include "cli/coordinator_connection.h"
#include "cli/flags.h"

namespace linea::cli {
namespace {

bool wants_help(int argc, char** argv, const std::string& usage, bool need_argument) {
  if (argc > 1 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
    std::fputs(usage.c_str(), stdout);
    return true;
  }
  if (need_argument && argc < 2) throw std::invalid_argument("expected arguments (see --help)");
  return false;
}

int run_cancel(int argc, char** argv) {
  const std::string usage = std::string(
                                "usage: linea cancel RUN... [options]\n\n"
                                "Cancels queued or running runs (a running job is stopped; its checkpoints stay).\n\n"
                                "options:\n") +
                            kConnectionOptionsHelp;
  if (wants_help(argc, argv, usage, true)) return 0;
  const Flags flags(argc, argv, {"coordinator", "token-file"}, {});
  if (flags.positional().empty()) throw std::invalid_argument("expected the names of the runs to cancel");
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
  if (wants_help(argc, argv, usage, false)) return 0;
  const Flags flags(argc, argv, {"coordinator", "token-file"}, {});
  if (!flags.positional().empty())
    throw std::invalid_argument("unexpected argument \"" + flags.positional().front() + "\"");
  CoordinatorConnection::from_flags(flags).request({{"type", "shutdown"}});
  std::printf("the coordinator is stopping\n");
  return 0;
}

const CommandRegistration cancel_registration({"cancel", "cancel runs on the coordinator", run_cancel});
const CommandRegistration shutdown_registration({"shutdown", "stop the coordinator (its state is kept)", run_shutdown});

}  // namespace
}  // namespace linea::cli

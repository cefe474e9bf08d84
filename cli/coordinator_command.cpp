// `linea coordinator [options]`: the job server (coordinator/coordinator.h) in the foreground.
#include <glog/logging.h>

#include <cstdio>
#include <filesystem>

#include "cli/command.h"
#include "cli/command_line.h"
#include "cli/coordinator_connection.h"
#include "coordinator/coordinator.h"
#include "coordinator/token_file.h"

namespace linea::cli {
namespace {

constexpr const char* kUsage =
    "usage: linea coordinator [options]\n"
    "\n"
    "Runs the job server: it keeps a queue of runs (`linea submit`), launches each as\n"
    "`mpirun ... linea train CONFIG OVERRIDES` (or `linea train` alone for one process), relaunches\n"
    "a job that dies or stops sending heartbeats (it resumes from its last checkpoint), and writes\n"
    "each sweep's summary when its runs end. Its state survives a restart (journal in --state-dir).\n"
    "\n"
    "options:\n"
    "  --host ADDR              address to listen on (default 127.0.0.1; use a reachable one for\n"
    "                           jobs on other hosts)\n"
    "  --port N                 port (default 47431; 0: any free port, printed at start)\n"
    "  --slots N                jobs running at once (default 1)\n"
    "  --state-dir DIR          journal and lock (default ~/.linea/coordinator)\n"
    "  --token-file FILE        shared secret, owner-only permissions (default STATE_DIR/token;\n"
    "                           created with a random token when missing)\n"
    "  --heartbeat-timeout S    a job silent this long is torn down and relaunched (default 300)\n"
    "  --startup-timeout S      the same before a job's first heartbeat (default 900)\n"
    "  --max-restarts N         relaunches allowed per run before it is marked failed (default 3)\n"
    "  --backoff S              delay before the first relaunch, doubling after each (default 5)\n"
    "  --backoff-max S          longest delay (default 300)\n"
    "  --kill-grace S           SIGTERM → SIGKILL delay when tearing a job down (default 10)\n"
    "  --hostfile FILE          passed to mpirun\n"
    "  --launch 'CMD ...'       the command of every job instead of mpirun / linea train, with\n"
    "                           placeholders {linea} {config} {overrides} {np} {hostfile} {run}\n"
    "                           {run_dir} {attempt}\n";

int run_coordinator(int argc, char** argv) {
  CommandLine flags("coordinator", kUsage);
  flags.option({"host", "port", "slots", "state-dir", "token-file", "heartbeat-timeout", "startup-timeout",
                "max-restarts", "backoff", "backoff-max", "kill-grace", "hostfile", "launch"});
  if (const auto done = flags.parse(argc, argv)) return *done;
  coordinator::CoordinatorOptions options;
  options.host = flags.string("host", options.host);
  options.port = static_cast<uint16_t>(flags.integer("port", options.port, 0, 65535));
  options.slots = flags.integer("slots", options.slots, 1, 100000);
  options.state_dir = flags.string("state-dir", default_state_dir());
  options.token_file = flags.string("token-file", options.state_dir + "/token");
  options.heartbeat_timeout_s = flags.number("heartbeat-timeout", options.heartbeat_timeout_s, 1e-3, 1e7);
  options.startup_timeout_s = flags.number("startup-timeout", options.startup_timeout_s, 1e-3, 1e7);
  options.max_restarts = flags.integer("max-restarts", options.max_restarts, 0, 1000000);
  options.backoff_base_s = flags.number("backoff", options.backoff_base_s, 0, 1e7);
  options.backoff_max_s = flags.number("backoff-max", options.backoff_max_s, 0, 1e7);
  options.kill_grace_s = flags.number("kill-grace", options.kill_grace_s, 0, 1e4);
  options.hostfile = flags.string("hostfile", "");
  if (const auto launch = flags.get("launch")) options.launch = coordinator::LaunchTemplate::uniform(*launch);
  options.handle_signals = true;

  FLAGS_logtostderr = true;
  if (!std::filesystem::exists(options.token_file)) {
    std::filesystem::create_directories(std::filesystem::path(options.token_file).parent_path().empty()
                                            ? std::filesystem::path(".")
                                            : std::filesystem::path(options.token_file).parent_path());
    coordinator::create_token_file(options.token_file);
    LOG(INFO) << "coordinator: created the token file " << options.token_file;
  }
  coordinator::Coordinator server(options);
  std::printf("linea coordinator: listening on %s:%u\n", options.host.c_str(), static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  server.run();
  return 0;
}

const CommandRegistration registration({"coordinator", "run the job server (queue, launch, restart, sweep results)",
                                        run_coordinator});

}  // namespace
}  // namespace linea::cli

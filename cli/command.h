// Subcommands of the `linea` binary. Each cli/<name>_command.cpp registers itself with a static
// CommandRegistration; main() dispatches on argv[1].
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace linea::cli {

struct Command {
  std::string name;
  std::string summary;  // one line for `linea --help`
  // argv[0] is the command name; returns the process exit code.
  std::function<int(int argc, char** argv)> run;
};

std::vector<Command>& command_registry();

struct CommandRegistration {
  explicit CommandRegistration(Command c) { command_registry().push_back(std::move(c)); }
};

}  // namespace linea::cli

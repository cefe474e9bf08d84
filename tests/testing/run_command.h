// Runs a `linea` subcommand in-process through the command registry (tests named test_*_command
// link the commands), as `linea NAME ARGS...` would; returns its exit code.
#pragma once
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/command.h"

namespace linea::testing {

inline int run_command(const std::string& name, std::vector<std::string> args) {
  const auto& registry = cli::command_registry();
  const auto command =
      std::find_if(registry.begin(), registry.end(), [&](const cli::Command& c) { return c.name == name; });
  if (command == registry.end()) throw std::logic_error("the " + name + " command is not registered");
  args.insert(args.begin(), name);
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  return command->run(static_cast<int>(argv.size()), argv.data());
}

}  // namespace linea::testing

// Runs a `linea` subcommand in-process through the command registry (tests named test_*_command
// link the commands), as `linea NAME ARGS...` would; returns its exit code. command_output: the
// same, expected to succeed, returning what it printed on stdout and on stderr.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
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

inline std::pair<std::string, std::string> command_output(const std::string& name,
                                                          const std::vector<std::string>& args) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int status = run_command(name, args);
  std::string out = ::testing::internal::GetCapturedStdout(), err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, 0) << "linea " << name << ": " << err;
  return {out, err};
}

}  // namespace linea::testing

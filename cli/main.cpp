// linea: train and study linear-attention language models. `linea --help` lists the commands.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>

#include "cli/command.h"

namespace {
void print_usage() {
  auto cmds = linea::cli::command_registry();
  std::sort(cmds.begin(), cmds.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::printf("usage: linea <command> [options]\n\ncommands:\n");
  for (const auto& c : cmds) std::printf("  %-12s %s\n", c.name.c_str(), c.summary.c_str());
  std::printf("\n`linea <command> --help` describes a command. With no command, `linea` runs `linea train`.\n");
}
}  // namespace

int main(int argc, char** argv) {
  using linea::cli::command_registry;
  const char* name = argc > 1 ? argv[1] : "train";
  if (!std::strcmp(name, "--help") || !std::strcmp(name, "-h") || !std::strcmp(name, "help")) {
    print_usage();
    return 0;
  }
  for (const auto& c : command_registry()) {
    if (c.name == name) {
      try {
        return argc > 1 ? c.run(argc - 1, argv + 1) : c.run(1, argv);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "linea %s: error: %s\n", name, e.what());
        return 1;
      }
    }
  }
  std::fprintf(stderr, "linea: unknown command '%s'\n\n", name);
  print_usage();
  return 2;
}

// `linea results SWEEP_DIR`: (re)writes a sweep's summary tables and loss plots (coordinator/results.h).
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/command_line.h"
#include "coordinator/results.h"

namespace linea::cli {
namespace {

constexpr const char* kUsage =
    "usage: linea results SWEEP_DIR\n"
    "\n"
    "Writes SWEEP_DIR/summary.md, summary.csv, loss.svg and val_loss.svg from sweep.json and each run's\n"
    "metrics.jsonl and coordinator.json (the coordinator does this itself when a sweep ends), and prints\n"
    "the Markdown table.\n";

int run_results(int argc, char** argv) {
  CommandLine flags("results", kUsage);
  if (const auto done = flags.positional(1, 1).parse(argc, argv)) return *done;
  const std::string& sweep_dir = flags.positional()[0];
  for (const std::string& file : coordinator::write_sweep_results(sweep_dir)) std::printf("wrote %s\n", file.c_str());
  std::string md;
  std::FILE* in = std::fopen((sweep_dir + "/summary.md").c_str(), "r");
  if (in) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, in)) > 0;) md.append(buf, n);
    std::fclose(in);
  }
  std::printf("\n%s", md.c_str());
  return 0;
}

const CommandRegistration registration({"results", "write a sweep's summary tables and loss plots", run_results});

}  // namespace
}  // namespace linea::cli

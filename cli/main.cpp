// linea: train and study linear-attention language models. `linea --help` lists the commands.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "cli/command.h"

namespace {

// OpenBLAS picks its kernels from the CPU model at load time and falls back to its slowest
// (Prescott, no AVX) on models it does not know, as on many VMs: 5x slower GEMMs. When
// OPENBLAS_CORETYPE is unset, name the core from the instruction sets the CPU reports and start
// again, since the choice is made before main() runs.
void choose_openblas_core(char** argv) {
#if defined(__x86_64__)
  if (std::getenv("OPENBLAS_CORETYPE")) return;
  const char* core = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq")) {
    core = "SkylakeX";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    core = "Haswell";
  }
  if (!core) return;
  setenv("OPENBLAS_CORETYPE", core, 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then go on with the default kernels
#else
  (void)argv;
#endif
}

void print_usage() {
  auto cmds = linea::cli::command_registry();
  std::sort(cmds.begin(), cmds.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::printf("usage: linea <command> [options]\n\ncommands:\n");
  for (const auto& c : cmds) std::printf("  %-12s %s\n", c.name.c_str(), c.summary.c_str());
  std::printf("\n`linea <command> --help` describes a command. With no command, `linea` runs `linea train`.\n");
}
}  // namespace

int main(int argc, char** argv) {
  choose_openblas_core(argv);
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

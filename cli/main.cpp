// linea: train and study linear-attention language models. `linea --help` lists the commands.
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "cli/command.h"
#include "cli/command_line.h"
#include "parallel/openmpi_leak_suppressions.h"

namespace {

// Some libraries read their settings from the environment once, when they are loaded, before
// main() runs. The functions below set such a variable (only when the user has not) and say
// whether they did; main() then starts the program again so that the libraries see it.

// OpenBLAS picks its kernels from the CPU model at load time and falls back to its slowest
// (Prescott, no AVX) on models it does not know, as on many VMs: 5x slower GEMMs. When
// OPENBLAS_CORETYPE is unset, name the core from the instruction sets the CPU reports.
bool choose_openblas_core() {
#if defined(__x86_64__)
  if (std::getenv("OPENBLAS_CORETYPE")) return false;
  const char* core = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq")) {
    core = "SkylakeX";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    core = "Haswell";
  }
  if (!core) return false;
  setenv("OPENBLAS_CORETYPE", core, 1);
  return true;
#else
  return false;
#endif
}

// By default an idle OpenMP thread of libgomp spins (300,000 polls) before it sleeps, at the end
// of every parallel region and between regions. Where the cores are shared (other jobs, or more
// threads than free cores) the spinning threads take the cores that the threads they wait for
// need. Measured with the default job on a shared 2-core machine: passive waiting halved the CPU
// time of a run and made steps 1.3-2x faster. On an idle machine it costs a futex wake per
// parallel region, and a step of the default job runs about 500 of them (microseconds each).
bool choose_openmp_wait_policy() {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return false;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  return true;
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
  const bool set_openblas = choose_openblas_core();
  if (choose_openmp_wait_policy() || set_openblas) {
    execv("/proc/self/exe", argv);  // returns only on failure: then go on with the libraries' defaults
  }
  // Warnings and errors of the libraries go to stderr, as before glog is initialised, without its
  // "Logging before InitGoogleLogging" notice.
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
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
      } catch (const linea::cli::CommandLine::UsageError& e) {  // a bad command line: exit 2
        std::fprintf(stderr, "linea %s: error: %s\n", name, e.what());
        return 2;
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

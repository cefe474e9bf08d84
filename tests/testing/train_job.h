// `linea train` as the fault tests start it: `mpirun -np N linea train CONFIG OVERRIDES...` (or the
// binary alone for N = 0), its output in a log file. Needs the LINEA_BINARY and MPIEXEC compile
// definitions (tests/CMakeLists.txt gives them to the fault tests).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "tests/testing/child_process.h"

namespace linea::testing {

class TrainJob : public ChildProcess {
 public:
  TrainJob(const std::filesystem::path& config, const std::vector<std::string>& overrides,
           const std::filesystem::path& log, int ranks = 2)
      : ChildProcess(arguments(config, overrides, ranks), log) {}

  pid_t rank_pid(int rank) const { return mpi_rank_pid(pid(), rank); }

 private:
  static std::vector<std::string> arguments(const std::filesystem::path& config,
                                            const std::vector<std::string>& overrides, int ranks) {
    std::vector<std::string> args;
    if (ranks > 0) args = {MPIEXEC, "-np", std::to_string(ranks), "--oversubscribe", "--allow-run-as-root"};
    args.insert(args.end(), {LINEA_BINARY, "train", config.string()});
    args.insert(args.end(), overrides.begin(), overrides.end());
    return args;
  }
};

}  // namespace linea::testing

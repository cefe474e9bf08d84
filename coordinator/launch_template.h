// LaunchTemplate: the command line that starts one attempt of a run, as a list of words with
// placeholders. A placeholder is a whole word, except {np}, {run}, {run_dir} and {attempt}, which
// may sit inside a word:
//   {linea}      the linea binary             {config}    the run's config file
//   {overrides}  the run's overrides, each its own word (zero or more)
//   {np}         the run's process count      {hostfile}  "--hostfile FILE", or nothing
//   {run}        the run's name               {run_dir}   the run's directory
//   {attempt}    0 for the first launch, then 1, 2, ...
// Runs of one process use `single_process` (by default `linea train` directly); others use
// `multi_process` (by default mpirun, forwarding the coordinator's environment variables to ranks,
// with its ranks unbound: mpirun would pin each of a small job's ranks to one core, and the ranks
// of jobs running side by side to the same cores).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "coordinator/run_spec.h"

namespace linea::coordinator {

struct LaunchTemplate {
  std::vector<std::string> single_process;
  std::vector<std::string> multi_process;

  static LaunchTemplate defaults();
  // One template for every run (e.g. a test's fake worker); words split on whitespace.
  static LaunchTemplate uniform(std::string_view command);
  // Throws std::invalid_argument naming an unknown placeholder or an empty template.
  void validate() const;

  std::vector<std::string> expand(const RunSpec& run, int64_t attempt, const std::string& linea_binary,
                                  const std::string& hostfile) const;
};

}  // namespace linea::coordinator

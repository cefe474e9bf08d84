#include "worker/thread_count.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "parallel/mpi_session.h"

namespace linea {

ThreadChoice choose_threads(const ThreadFacts& f) {
  if (f.configured > 0) return {static_cast<int>(f.configured), ""};
  if (f.omp_num_threads > 0) return {f.omp_num_threads, ""};
  const int share = std::max(1, f.cores / std::max(1, f.local_ranks)), bound = std::max(1, f.bound_cores);
  if (bound >= share) return {share, ""};
  if (!f.under_launcher) return {bound, ""};
  return {bound, "note: the launcher bound this rank to " + std::to_string(bound) + " of the node's " +
                     std::to_string(f.cores) + " cores, so it runs that many threads instead of its share, " +
                     std::to_string(share) + " (pass mpirun --bind-to none or --map-by slot:PE=" +
                     std::to_string(share) + ", or set train.threads)\n"};
}

ThreadFacts this_process_thread_facts(int64_t configured, int local_ranks) {
  ThreadFacts f;
  f.configured = configured;
  f.omp_num_threads = std::getenv("OMP_NUM_THREADS") ? omp_get_max_threads() : 0;
  f.cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  f.local_ranks = local_ranks;
  f.bound_cores = omp_get_num_procs();
  f.under_launcher = launched_by_mpi_launcher();
  return f;
}

}  // namespace linea

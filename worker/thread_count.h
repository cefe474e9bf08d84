// How many threads a rank of `linea train` runs: train.threads when set, else OMP_NUM_THREADS when
// set, else its share of the node's cores (cores / ranks on the node), at most the cores it may run
// on. Under an MPI launcher that bound the rank to fewer cores than its share, `note` says so and
// how to give it its share (empty otherwise: outside a launcher the affinity is the user's choice).
#pragma once
#include <cstdint>
#include <string>

namespace linea {

struct ThreadFacts {
  int64_t configured = 0;       // train.threads (0: not set)
  int omp_num_threads = 0;      // OpenMP's threads when OMP_NUM_THREADS is set (0: not set)
  int cores = 1;                // the node's cores
  int local_ranks = 1;          // ranks of the job on this node
  int bound_cores = 1;          // cores this process may run on
  bool under_launcher = false;  // started by mpirun, srun, ...
};

struct ThreadChoice {
  int count = 1;
  std::string note;  // a line for the log, or empty
};

ThreadChoice choose_threads(const ThreadFacts& facts);

// The facts of this process (its affinity, the environment) for a rank with `configured` threads
// and `local_ranks` ranks on its node.
ThreadFacts this_process_thread_facts(int64_t configured, int local_ranks);

}  // namespace linea

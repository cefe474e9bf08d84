// MpiSession: the process's MPI lifetime — MPI_Init_thread when made, MPI_Finalize when destroyed.
//
// When MPI starts (the choice linea makes, so that a plain `linea train` needs no launcher):
//   LaunchMode::auto_detect  MPI starts only when an MPI launcher started this process, recognised by
//                            the variables launchers set: OMPI_COMM_WORLD_SIZE (Open MPI's mpirun),
//                            PMI_SIZE (MPICH/Hydra, Slurm's PMI-2), PMIX_RANK (PMIx, `srun --mpi=pmix`).
//                            Otherwise the process runs alone without MPI (no singleton daemon, no
//                            network set-up) and ProcessGrid gives it a one-rank grid.
//   LaunchMode::mpi          MPI always starts (a plain process becomes an MPI singleton).
//   LaunchMode::single       MPI never starts.
// Thread level: MPI_THREAD_SERIALIZED is required (any one thread at a time may call MPI).
// MPI_COMM_WORLD gets MPI_ERRORS_RETURN, so MPI errors become exceptions (mpi_error.h).
// MPI can be started once per process: a second session while one is active throws. A session
// made while MPI is already running (started by someone else) uses it and does not finalise it.
#pragma once
#include <string_view>

namespace linea {

enum class LaunchMode { auto_detect, mpi, single };
LaunchMode parse_launch_mode(std::string_view text);  // "auto", "mpi" or "single"

// True when the environment shows an MPI launcher started this process (see above).
bool launched_by_mpi_launcher();

class MpiSession {
 public:
  explicit MpiSession(LaunchMode mode = LaunchMode::auto_detect, int* argc = nullptr, char*** argv = nullptr);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  bool uses_mpi() const { return uses_mpi_; }  // false: single process without MPI
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

  // Ends the whole job after an unrecoverable error: MPI_Abort under MPI (the launcher then stops
  // every rank, none is left waiting in a collective), std::exit otherwise.
  [[noreturn]] void abort(int exit_code) const;

 private:
  bool uses_mpi_ = false;
  bool owns_mpi_ = false;
  int world_rank_ = 0;
  int world_size_ = 1;
};

}  // namespace linea

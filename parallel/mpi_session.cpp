#include "parallel/mpi_session.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "parallel/mpi_error.h"

namespace linea {

namespace {
bool session_active = false;  // one MpiSession at a time per process
}  // namespace

LaunchMode parse_launch_mode(std::string_view text) {
  if (text == "auto") return LaunchMode::auto_detect;
  if (text == "mpi") return LaunchMode::mpi;
  if (text == "single") return LaunchMode::single;
  throw std::invalid_argument("launch mode: expected \"auto\", \"mpi\" or \"single\", got \"" + std::string(text) +
                              "\"");
}

bool launched_by_mpi_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(name)) return true;
  }
  return false;
}

MpiSession::MpiSession(LaunchMode mode, int* argc, char*** argv) {
  if (session_active) throw std::logic_error("MpiSession: a session is already active in this process");
  uses_mpi_ = mode == LaunchMode::mpi || (mode == LaunchMode::auto_detect && launched_by_mpi_launcher());
  if (uses_mpi_) {
    if (!mpi_is_initialized()) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (finalized) throw std::logic_error("MpiSession: MPI was already finalised in this process");
      int provided = 0;
      if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        throw std::runtime_error("MpiSession: MPI_Init_thread failed");
      }
      owns_mpi_ = true;
      if (provided < MPI_THREAD_SERIALIZED) {
        MPI_Finalize();
        throw std::runtime_error("MpiSession: the MPI library provides thread level " + std::to_string(provided) +
                                 ", linea needs MPI_THREAD_SERIALIZED (" + std::to_string(MPI_THREAD_SERIALIZED) + ")");
      }
    }
    check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler(MPI_COMM_WORLD)");
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_), "MPI_Comm_rank(MPI_COMM_WORLD)");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world_size_), "MPI_Comm_size(MPI_COMM_WORLD)");
  }
  session_active = true;
}

MpiSession::~MpiSession() {
  if (owns_mpi_ && mpi_is_initialized()) MPI_Finalize();
  session_active = false;
}

void MpiSession::abort(int exit_code) const {
  if (uses_mpi_ && mpi_is_initialized()) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

}  // namespace linea

#include "parallel/mpi_comm.h"

#include <string>

#include "parallel/mpi_error.h"

namespace linea {

MpiComm& MpiComm::operator=(MpiComm&& other) noexcept {
  if (this != &other) {
    reset();
    comm_ = other.comm_;
    other.comm_ = MPI_COMM_NULL;
  }
  return *this;
}

void MpiComm::reset() {
  if (comm_ != MPI_COMM_NULL && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_SELF && mpi_is_initialized()) {
    MPI_Comm_free(&comm_);
  }
  comm_ = MPI_COMM_NULL;
}

MpiComm MpiComm::duplicate(MPI_Comm comm, std::string_view what) {
  MPI_Comm out = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(comm, &out), "MPI_Comm_dup (" + std::string(what) + ")");
  return MpiComm(out);
}

MpiComm MpiComm::split(MPI_Comm comm, int color, int key, std::string_view what) {
  MPI_Comm out = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(comm, color, key, &out), "MPI_Comm_split (" + std::string(what) + ")");
  return MpiComm(out);
}

MpiComm MpiComm::split_shared_memory(MPI_Comm comm, int key, std::string_view what) {
  MPI_Comm out = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, key, MPI_INFO_NULL, &out),
            "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) (" + std::string(what) + ")");
  return MpiComm(out);
}

int comm_rank(MPI_Comm comm) {
  int r = 0;
  check_mpi(MPI_Comm_rank(comm, &r), "MPI_Comm_rank");
  return r;
}

int comm_size(MPI_Comm comm) {
  int s = 0;
  check_mpi(MPI_Comm_size(comm, &s), "MPI_Comm_size");
  return s;
}

}  // namespace linea

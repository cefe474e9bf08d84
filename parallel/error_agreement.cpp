#include "parallel/error_agreement.h"

#include <vector>

#include "parallel/mpi_error.h"
#include "parallel/mpi_wait.h"

namespace linea {

std::string gather_errors(MPI_Comm comm, std::string_view local_error, std::chrono::milliseconds timeout) {
  int size = 0;
  check_mpi(MPI_Comm_size(comm, &size), "gather_errors: MPI_Comm_size");
  // Lengths first, then the texts themselves (most often all empty, and the second step is skipped).
  int length = static_cast<int>(local_error.size());
  std::vector<int> lengths(static_cast<size_t>(size));
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm, &request),
            "gather_errors: MPI_Iallgather");
  wait_one(request, timeout, "gather_errors: exchanging error lengths");

  std::vector<int> displacements(static_cast<size_t>(size));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    displacements[static_cast<size_t>(r)] = total;
    total += lengths[static_cast<size_t>(r)];
  }
  if (total == 0) return {};
  std::string texts(static_cast<size_t>(total), '\0');
  check_mpi(MPI_Iallgatherv(local_error.data(), length, MPI_CHAR, texts.data(), lengths.data(), displacements.data(),
                            MPI_CHAR, comm, &request),
            "gather_errors: MPI_Iallgatherv");
  wait_one(request, timeout, "gather_errors: exchanging error messages");

  std::string combined;
  for (int r = 0; r < size; ++r) {
    if (lengths[static_cast<size_t>(r)] == 0) continue;
    if (!combined.empty()) combined += "; ";
    combined += "rank " + std::to_string(r) + ": " +
                texts.substr(static_cast<size_t>(displacements[static_cast<size_t>(r)]),
                             static_cast<size_t>(lengths[static_cast<size_t>(r)]));
  }
  return combined;
}

}  // namespace linea

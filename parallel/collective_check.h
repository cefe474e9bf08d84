// CollectiveChecker: the validation mode of a communicator. Before each operation the ranks
// exchange a CollectiveCall over a separate MPI communicator of the same group and compare them,
// so that mismatched calls (different sizes, dtypes, roots or operations, or a rank that skipped a
// call) are reported on every rank involved instead of hanging or mixing data:
// - a collective: all ranks all-gather their calls (plus a per-communicator call number) and
//   check that they agree; every rank reaches the same verdict and throws the same
//   CollectiveMismatch listing what each rank asked for;
// - send/recv: the two peers swap their calls; both throw when they do not pair up.
// The exchanges wait at most `timeout` (mpi_wait.h). Costs one small collective per operation,
// so it is meant for tests and debugging runs.
#pragma once
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "parallel/collective_call.h"
#include "parallel/mpi_comm.h"

namespace linea {

class CollectiveMismatch : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CollectiveChecker {
 public:
  // Collective over `group`: works on its own duplicate of it.
  CollectiveChecker(MPI_Comm group, std::string communicator_name, std::chrono::milliseconds timeout);

  // All ranks of the group; throws CollectiveMismatch on every rank when they disagree.
  void check_collective(const CollectiveCall& call);
  // This rank and call.peer only (call.kind is send or recv).
  void check_point_to_point(const CollectiveCall& call);
  // After a failure: never free the MPI communicator, an exchange may still be pending on it.
  void abandon() { control_.leak(); }

 private:
  MpiComm control_;
  std::string name_;
  std::chrono::milliseconds timeout_;
  int rank_ = 0;
  uint64_t collective_count_ = 0;  // numbers the collectives, so a skipped call shows
};

}  // namespace linea

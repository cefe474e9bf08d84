// Waiting for nonblocking MPI operations with a deadline.
//
// A collective that some rank never joins (it failed, or called something else) would block the
// others forever. linea's MPI code starts every operation nonblocking and waits here: after
// `timeout` the wait gives up and throws CommunicationTimeout naming the operation, so every rank
// still waiting reports an error instead of hanging. timeout == 0 waits without limit.
// MPI cannot cancel a collective, so after a timeout the operation stays pending and the
// communicator it was started on must not be used again (Communicator enforces this).
#pragma once
#include <mpi.h>

#include <chrono>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace linea {

class CommunicationTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Waits until every request has completed (they become MPI_REQUEST_NULL). Throws
// CommunicationTimeout after `timeout`, MpiError when MPI reports an error.
void wait_all(std::span<MPI_Request> requests, std::chrono::milliseconds timeout, std::string_view what);
inline void wait_one(MPI_Request& request, std::chrono::milliseconds timeout, std::string_view what) {
  wait_all(std::span<MPI_Request>(&request, 1), timeout, what);
}

}  // namespace linea

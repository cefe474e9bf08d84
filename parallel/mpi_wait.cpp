#include "parallel/mpi_wait.h"

#include <thread>

#include "parallel/mpi_error.h"

namespace linea {

void wait_all(std::span<MPI_Request> requests, std::chrono::milliseconds timeout, std::string_view what) {
  const int count = static_cast<int>(requests.size());
  if (timeout.count() <= 0) {
    check_mpi(MPI_Waitall(count, requests.data(), MPI_STATUSES_IGNORE), what);
    return;
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  // Spin on MPI_Testall (each call also drives MPI's progress engine); once the wait has lasted a
  // little, yield the core between tests so that oversubscribed ranks can run.
  constexpr auto kSpinFor = std::chrono::microseconds(200);
  for (;;) {
    int done = 0;
    check_mpi(MPI_Testall(count, requests.data(), &done, MPI_STATUSES_IGNORE), what);
    if (done) return;
    const auto waited = Clock::now() - start;
    if (waited > timeout) {
      throw CommunicationTimeout(std::string(what) + ": not complete after " + std::to_string(timeout.count()) +
                                 " ms; another rank has failed or is calling a different operation");
    }
    if (waited > kSpinFor) std::this_thread::yield();
  }
}

}  // namespace linea

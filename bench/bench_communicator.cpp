// Communicator benchmark (CPU, under mpirun): MpiCommunicator's deterministic all_reduce (f32 sum)
// against MPI's own MPI_Allreduce (whose summation order is unspecified) and the validation mode's
// extra cost, per buffer size. Time is the median over ranks' maxima; bus bandwidth counts the
// 2·(R−1)/R of the buffer a bandwidth-optimal all-reduce moves per rank. One JSON line per size,
// printed by rank 0.   Usage: mpirun -np N bench_communicator [largest element count, default 2^24]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/random.h"
#include "parallel/mpi_communicator.h"
#include "parallel/mpi_session.h"

namespace linea {
namespace {

// Median over `reps` of the slowest rank's time for fn, in seconds.
template <class Fn>
double time_median(int reps, Fn&& fn) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    fn();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    t.push_back(s);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void run(int64_t largest) {
  CommunicatorOptions plain;
  CommunicatorOptions validated = plain;
  validated.validate = true;
  MpiCommunicator comm(MPI_COMM_WORLD, "world", plain);
  MpiCommunicator checked(MPI_COMM_WORLD, "world", validated);
  const int R = comm.size();
  for (int64_t n = 1024; n <= largest; n *= 16) {
    Tensor x = Tensor::empty({n}, DType::f32);
    Rng rng(static_cast<uint64_t>(comm.rank()));
    fill_normal(x, rng, 0.0, 1.0);
    const int reps = n <= (1 << 16) ? 50 : 7;
    comm.all_reduce(x, ReduceOp::sum);  // warm-up (scratch allocation, connections)
    const double ours = time_median(reps, [&] { comm.all_reduce(x, ReduceOp::sum); });
    const double with_checks = time_median(reps, [&] { checked.all_reduce(x, ReduceOp::sum); });
    const double mpi = time_median(
        reps, [&] { MPI_Allreduce(MPI_IN_PLACE, x.raw(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); });
    const double bus_bytes = 2.0 * (R - 1) / R * static_cast<double>(x.nbytes());
    if (comm.rank() == 0) {
      std::printf(
          "{\"bench\": \"all_reduce\", \"ranks\": %d, \"elements\": %lld, \"ms\": %.4f, \"bus_GBps\": %.3f, "
          "\"validated_ms\": %.4f, \"mpi_allreduce_ms\": %.4f, \"mpi_bus_GBps\": %.3f}\n",
          R, static_cast<long long>(n), ours * 1e3, bus_bytes / ours / 1e9, with_checks * 1e3, mpi * 1e3,
          bus_bytes / mpi / 1e9);
    }
  }
}

}  // namespace
}  // namespace linea

int main(int argc, char** argv) {
  linea::MpiSession session(linea::LaunchMode::mpi, &argc, &argv);
  const int64_t largest = argc > 1 ? std::atoll(argv[1]) : int64_t{1} << 24;
  linea::run(largest);
  return 0;
}

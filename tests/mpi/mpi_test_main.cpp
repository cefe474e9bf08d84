// main() of the MPI test executables, which ctest runs under mpirun with 2 and 4 ranks.
// Starts MPI; rank 0 prints gtest's usual output, the other ranks print only their failures
// (prefixed with their rank); after each test rank 0 names the ranks on which it failed, and the
// exit code is the same on every rank: failure when any rank failed.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "parallel/mpi_session.h"

namespace {

// Failures of this rank, printed as they happen (used on ranks other than 0).
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, result.file_name() ? result.file_name() : "?",
                 result.line_number(), result.summary());
  }

 private:
  int rank_;
};

// After each test, gathers pass/fail from every rank; rank 0 reports the ranks that failed.
class RankAgreement : public ::testing::EmptyTestEventListener {
 public:
  RankAgreement(int rank, int size) : rank_(rank), size_(size) {}
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const int failed = info.result()->Failed() ? 1 : 0;
    std::vector<int> all(static_cast<size_t>(size_));
    MPI_Allgather(&failed, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
    if (rank_ != 0) return;
    for (int r = 1; r < size_; ++r) {
      if (all[static_cast<size_t>(r)]) {
        std::fprintf(stderr, "[  FAILED  ] %s.%s on rank %d\n", info.test_suite_name(), info.name(), r);
      }
    }
  }

 private:
  int rank_, size_;
};

}  // namespace

int main(int argc, char** argv) {
  linea::MpiSession session(linea::LaunchMode::mpi, &argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (session.world_rank() != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(session.world_rank()));
  }
  listeners.Append(new RankAgreement(session.world_rank(), session.world_size()));
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = failed;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (session.world_rank() == 0 && any_failed && !failed) std::fprintf(stderr, "tests failed on other ranks\n");
  return any_failed;
}

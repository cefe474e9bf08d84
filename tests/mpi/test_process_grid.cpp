// ProcessGrid under mpirun (2 and 4 ranks): the rank arithmetic and the members of every TP and DP
// group for the layouts 1×4, 2×2, 4×1 (4 ranks) and 2×1, 1×2 (2 ranks, and each half of a 4-rank
// world), communication confined to each group, and layout errors thrown on every rank alike.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "parallel/mpi_comm.h"
#include "parallel/process_grid.h"

namespace linea {
namespace {

using namespace std::chrono_literals;

CommunicatorOptions test_options() {
  CommunicatorOptions options;
  options.validate = true;
  options.timeout = 30s;
  return options;
}

// The world ranks of the members of `comm`'s group, in group-rank order.
std::vector<int64_t> members(Communicator& comm, int world_rank) {
  Tensor mine = Tensor::empty({1}, DType::i64);
  mine.data<int64_t>()[0] = world_rank;
  Tensor all = Tensor::empty({comm.size()}, DType::i64);
  comm.all_gather(mine, all);
  return {all.data<int64_t>(), all.data<int64_t>() + comm.size()};
}

void check_grid(MPI_Comm parent, int tp, int dp) {
  SCOPED_TRACE("layout tp=" + std::to_string(tp) + " dp=" + std::to_string(dp));
  const int rank = comm_rank(parent), size = comm_size(parent);
  ProcessGrid grid = ProcessGrid::create({tp, dp}, test_options(), parent);
  ASSERT_TRUE(grid.uses_mpi());
  EXPECT_EQ(grid.world_rank(), rank);
  EXPECT_EQ(grid.world_size(), size);
  EXPECT_EQ(grid.tp_size(), tp);
  EXPECT_EQ(grid.dp_size(), dp);
  EXPECT_EQ(grid.dp_rank() * tp + grid.tp_rank(), rank);
  // All ranks of a test run share one node.
  EXPECT_EQ(grid.local_size(), size);
  EXPECT_EQ(grid.local_rank(), rank);

  Communicator& tp_comm = grid.comm(GridAxis::tp);
  Communicator& dp_comm = grid.comm(GridAxis::dp);
  EXPECT_EQ(tp_comm.size(), tp);
  EXPECT_EQ(tp_comm.rank(), grid.tp_rank());
  EXPECT_EQ(dp_comm.size(), dp);
  EXPECT_EQ(dp_comm.rank(), grid.dp_rank());
  EXPECT_EQ(grid.comm(GridAxis::world).size(), size);

  std::vector<int64_t> expected_tp, expected_dp, everyone;
  for (int t = 0; t < tp; ++t) expected_tp.push_back(grid.dp_rank() * tp + t);  // consecutive ranks
  for (int d = 0; d < dp; ++d) expected_dp.push_back(d * tp + grid.tp_rank());  // stride tp
  for (int r = 0; r < size; ++r) everyone.push_back(r);
  EXPECT_EQ(members(tp_comm, rank), expected_tp);
  EXPECT_EQ(members(dp_comm, rank), expected_dp);
  EXPECT_EQ(members(grid.comm(GridAxis::world), rank), everyone);

  // A reduction along one axis stays inside the group.
  Tensor x = Tensor::empty({1}, DType::i64);
  x.data<int64_t>()[0] = rank;
  tp_comm.all_reduce(x, ReduceOp::sum);
  int64_t tp_sum = 0;
  for (int64_t r : expected_tp) tp_sum += r;
  EXPECT_EQ(x.data<int64_t>()[0], tp_sum);

  EXPECT_THROW(grid.comm(GridAxis::dp, Device::cuda), std::logic_error);  // enable_cuda() not called
}

TEST(ProcessGrid, EveryLayoutOfTheWorld) {
  const int size = comm_size(MPI_COMM_WORLD);
  for (int tp = 1; tp <= size; ++tp) {
    if (size % tp == 0) check_grid(MPI_COMM_WORLD, tp, size / tp);
  }
}

TEST(ProcessGrid, TwoRankLayoutsOnEachHalfOfTheWorld) {
  const int size = comm_size(MPI_COMM_WORLD);
  if (size != 4) GTEST_SKIP() << "needs 4 ranks (with 2 the whole world covers 2×1 and 1×2)";
  const MpiComm half = MpiComm::split(MPI_COMM_WORLD, comm_rank(MPI_COMM_WORLD) / 2, 0, "half");
  check_grid(half.get(), 2, 1);
  check_grid(half.get(), 1, 2);
}

TEST(ProcessGrid, DpDefaultsToWorldSizeOverTp) {
  ProcessGrid grid = ProcessGrid::create({2, 0}, test_options());
  EXPECT_EQ(grid.dp_size(), comm_size(MPI_COMM_WORLD) / 2);
}

// Expects create() to throw std::invalid_argument containing `text` on this rank.
void expect_layout_error(GridLayout layout, const std::string& text) {
  try {
    ProcessGrid::create(layout, test_options());
    ADD_FAILURE() << "no error for tp=" << layout.tp << " dp=" << layout.dp;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(ProcessGrid, LayoutNotMatchingTheWorldFailsOnEveryRank) {
  const std::string world = std::to_string(comm_size(MPI_COMM_WORLD));
  expect_layout_error({3, 0}, "tp=3 does not divide the world size " + world);
  expect_layout_error({1, 3}, "layout tp=1 × dp=3 needs 3 ranks but the world has " + world);
  expect_layout_error({2, 4}, "needs 8 ranks but the world has " + world);
  expect_layout_error({0, 1}, "tp must be >= 1");
  // Nothing is left pending: a valid grid still forms.
  EXPECT_EQ(ProcessGrid::create({1, 0}, test_options()).dp_size(), comm_size(MPI_COMM_WORLD));
}

TEST(ProcessGrid, RanksAskingForDifferentLayoutsFailTogether) {
  const int rank = comm_rank(MPI_COMM_WORLD), size = comm_size(MPI_COMM_WORLD);
  // Rank 0 asks for pure tensor parallelism, the others for pure data parallelism: each layout
  // alone fits the world, so only comparing them shows the problem.
  const GridLayout layout = rank == 0 ? GridLayout{size, 1} : GridLayout{1, size};
  expect_layout_error(layout, "ranks disagree on the layout: rank 0 asks tp=" + std::to_string(size) +
                                  " × dp=1; rank 1 asks tp=1 × dp=" + std::to_string(size));
  EXPECT_EQ(ProcessGrid::create({size, 1}, test_options()).tp_size(), size);
}

}  // namespace
}  // namespace linea

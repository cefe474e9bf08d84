// The parts of parallel/ that run without MPI: the ordered reduction kernel against sums written
// out here, the one-rank LocalCommunicator, the one-rank ProcessGrid of a process started without a
// launcher, launcher detection and MpiSession's single-process mode.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "parallel/local_communicator.h"
#include "parallel/mpi_error.h"
#include "parallel/mpi_session.h"
#include "parallel/ordered_reduce.h"
#include "parallel/process_grid.h"

namespace linea {
namespace {

TEST(OrderedReduce, SumsInRankOrderAndRoundsOnce) {
  // bf16 has 8 significant bits: adding 2^-9 to 1 one at a time in bf16 would stay at 1, while the
  // wide sum 1 + 4·2^-9 = 1 + 2^-7 is exact in bf16.
  const float small = 1.0f / 512;
  std::vector<bf16> in = {bf16(1.0f), bf16(small), bf16(small), bf16(small), bf16(small)};
  bf16 out;
  ordered_reduce(in.data(), 5, 1, ReduceOp::sum, &out);
  EXPECT_EQ(static_cast<float>(out), 1.0f + 1.0f / 128);

  // f64 in rank order: (1e17 + 1) − 1e17 + 1 = 1 (1e17 + 1 rounds to 1e17), not 2.
  std::vector<double> big = {1e17, 1.0, -1e17, 1.0};
  double sum = 0;
  ordered_reduce(big.data(), 4, 1, ReduceOp::sum, &sum);
  EXPECT_EQ(sum, 1.0);

  // f32: mean of three ranks over two elements, divided once in f64.
  std::vector<float> f = {1.f, 2.f, 4.f, 8.f, 16.f, 32.f};  // rank r holds elements [2r, 2r+1]
  std::vector<float> mean(2);
  ordered_reduce(f.data(), 3, 2, ReduceOp::avg, mean.data());
  EXPECT_EQ(mean[0], static_cast<float>((1.0 + 4.0 + 16.0) / 3));
  EXPECT_EQ(mean[1], static_cast<float>((2.0 + 8.0 + 32.0) / 3));

  // Integers add exactly in int64; their mean is refused.
  std::vector<int64_t> ints = {int64_t{1} << 62, -(int64_t{1} << 62), 7};
  int64_t total = 0;
  ordered_reduce(DType::i64, ints.data(), 3, 1, ReduceOp::sum, &total);
  EXPECT_EQ(total, 7);
  EXPECT_THROW(ordered_reduce(DType::i32, ints.data(), 1, 1, ReduceOp::avg, &total), std::invalid_argument);
}

TEST(OrderedReduce, OutputMayBeOneOfTheContributions) {
  std::vector<double> in = {1, 2, 3, 10, 20, 30};  // two ranks × three elements
  ordered_reduce(in.data(), 2, 3, ReduceOp::sum, in.data() + 3);
  EXPECT_EQ(std::vector<double>(in.begin() + 3, in.end()), (std::vector<double>{11, 22, 33}));
}

TEST(LocalCommunicator, OneRankCollectivesAreIdentitiesAndCopies) {
  LocalCommunicator comm("world", Device::cpu);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_EQ(comm.rank(), 0);
  Tensor x = Tensor::empty({3}, DType::f32);
  for (int i = 0; i < 3; ++i) x.data<float>()[i] = 1.5f * static_cast<float>(i);
  comm.all_reduce(x, ReduceOp::avg);
  comm.broadcast(x, 0);
  comm.barrier();
  comm.synchronize();
  EXPECT_EQ(x.data<float>()[2], 3.0f);

  Tensor gathered = Tensor::zeros({3}, DType::f32);
  comm.all_gather(x, gathered);
  Tensor scattered = Tensor::zeros({3}, DType::f32);
  comm.reduce_scatter(gathered, scattered, ReduceOp::sum);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(scattered.data<float>()[i], 1.5f * static_cast<float>(i));
  comm.all_gather(scattered, scattered);  // in place

  EXPECT_THROW(comm.send(x, 0), std::invalid_argument);
  EXPECT_THROW(comm.recv(x, 1), std::invalid_argument);
  EXPECT_THROW(comm.broadcast(x, 1), std::invalid_argument);
  EXPECT_THROW(comm.all_gather(x, Tensor::zeros({4}, DType::f32)), std::invalid_argument);
  EXPECT_THROW(comm.all_reduce(Tensor::zeros({2}, DType::i64), ReduceOp::avg), std::invalid_argument);
  try {
    comm.reduce_scatter(Tensor::zeros({4}, DType::f32), Tensor::zeros({3}, DType::f32), ReduceOp::sum);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "communicator 'world' (local), reduce_scatter(f32 × 4, sum): input must hold size() × output.numel() = "
              "1 × 3 elements");
  }
}

TEST(ProcessGrid, WithoutMpiIsOneRank) {
  ASSERT_FALSE(mpi_is_initialized());
  ProcessGrid grid = ProcessGrid::create({1, 0});
  EXPECT_FALSE(grid.uses_mpi());
  EXPECT_EQ(grid.world_size(), 1);
  EXPECT_EQ(grid.dp_size(), 1);
  EXPECT_EQ(grid.tp_size(), 1);
  EXPECT_EQ(grid.local_rank(), 0);
  EXPECT_EQ(grid.comm(GridAxis::dp).backend(), "local");
  EXPECT_EQ(grid.describe(), "rank 0 of 1 = dp 1 × tp 1 (dp 0, tp 0), local rank 0 of 1, without MPI");
  try {
    ProcessGrid::create({2, 1});
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("needs 2 ranks but the world has 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("without MPI"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ProcessGrid::create({1, 2}), std::invalid_argument);
}

TEST(MpiSession, DetectsLaunchersAndStaysSingleWithoutOne) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) unsetenv(name);
  EXPECT_FALSE(launched_by_mpi_launcher());
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    setenv(name, "2", 1);
    EXPECT_TRUE(launched_by_mpi_launcher()) << name;
    unsetenv(name);
  }
  EXPECT_EQ(parse_launch_mode("auto"), LaunchMode::auto_detect);
  EXPECT_EQ(parse_launch_mode("single"), LaunchMode::single);
  EXPECT_EQ(parse_launch_mode("mpi"), LaunchMode::mpi);
  EXPECT_THROW(parse_launch_mode("MPI"), std::invalid_argument);
  {
    MpiSession session(LaunchMode::auto_detect);  // no launcher: no MPI
    EXPECT_FALSE(session.uses_mpi());
    EXPECT_EQ(session.world_size(), 1);
    EXPECT_THROW(MpiSession second(LaunchMode::single), std::logic_error);
  }
  EXPECT_FALSE(mpi_is_initialized());
}

}  // namespace
}  // namespace linea

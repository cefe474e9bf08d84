// NcclCommunicator under mpirun (one rank per GPU; skipped on every rank when the node has fewer
// GPUs than ranks): every collective on GPU tensors against values computed here, mismatched calls
// reported on every rank, and a rank that never comes turning into a timeout instead of a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "parallel/collective_check.h"
#include "parallel/cuda/nccl_communicator.h"
#include "parallel/mpi_comm.h"
#include "parallel/mpi_wait.h"
#include "parallel/process_grid.h"

namespace linea {
namespace {

using namespace std::chrono_literals;

// Rank r's element i: multiples of 1/4, so that sums and means over 2 to 8 ranks are exact.
double contribution(int rank, int64_t i) { return ((rank + 1) * (i % 7 + 1) - 3 * (i % 3)) * 0.25; }

double read(const Tensor& host, int64_t i) {
  switch (host.dtype()) {
    case DType::f32: return host.data<float>()[i];
    case DType::f64: return host.data<double>()[i];
    case DType::bf16: return static_cast<float>(host.data<bf16>()[i]);
    default: return host.data<int32_t>()[i];
  }
}

// A GPU tensor of n elements holding rank r's contributions (as integers ×4 for i32).
Tensor on_gpu(int64_t n, DType dtype, int rank) {
  Tensor host = Tensor::empty({n}, dtype);
  for (int64_t i = 0; i < n; ++i) {
    const double v = contribution(rank, i);
    switch (dtype) {
      case DType::f32: host.data<float>()[i] = static_cast<float>(v); break;
      case DType::f64: host.data<double>()[i] = v; break;
      case DType::bf16: host.data<bf16>()[i] = bf16(static_cast<float>(v)); break;
      default: host.data<int32_t>()[i] = static_cast<int32_t>(4 * v); break;
    }
  }
  Tensor gpu = Tensor::empty({n}, dtype, Device::cuda);
  gpu.copy_from(host);
  return gpu;
}

double expected_value(int rank, int64_t i, DType dtype) {
  return dtype == DType::i32 ? 4 * contribution(rank, i) : contribution(rank, i);
}

class Nccl : public ::testing::Test {
 protected:
  void SetUp() override {
    CommunicatorOptions options;
    options.validate = true;
    options.timeout = 60s;
    grid_ = std::make_unique<ProcessGrid>(ProcessGrid::create({1, 0}, options));
    try {
      grid_->enable_cuda();
    } catch (const std::invalid_argument& e) {  // agreed on by every rank
      GTEST_SKIP() << e.what();
    }
  }
  Communicator& world() { return grid_->comm(GridAxis::world, Device::cuda); }
  std::unique_ptr<ProcessGrid> grid_;
};

TEST_F(Nccl, Collectives) {
  Communicator& comm = world();
  const int R = comm.size(), me = comm.rank();
  EXPECT_EQ(comm.backend(), "nccl");
  constexpr int64_t n = 1001;
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::i32}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      if (op == ReduceOp::avg && dtype == DType::i32) continue;
      Tensor x = on_gpu(n, dtype, me);
      comm.all_reduce(x, op);
      comm.synchronize();
      const Tensor host = x.clone();
      for (int64_t i = 0; i < n; ++i) {
        double s = 0;
        for (int r = 0; r < R; ++r) s += expected_value(r, i, dtype);
        ASSERT_EQ(read(host, i), op == ReduceOp::avg ? s / R : s) << dtype_name(dtype) << " i=" << i;
      }
    }
    // reduce_scatter of R·m elements, then all_gather of the chunks back.
    const int64_t m = 37;
    Tensor input = on_gpu(R * m, dtype, me);
    Tensor chunk = Tensor::empty({m}, dtype, Device::cuda);
    comm.reduce_scatter(input, chunk, ReduceOp::sum);
    Tensor gathered = Tensor::empty({R * m}, dtype, Device::cuda);
    comm.all_gather(chunk, gathered);
    comm.synchronize();
    const Tensor host = gathered.clone();
    for (int64_t i = 0; i < R * m; ++i) {
      double s = 0;
      for (int r = 0; r < R; ++r) s += expected_value(r, i, dtype);
      ASSERT_EQ(read(host, i), s) << dtype_name(dtype) << " i=" << i;
    }
    // broadcast from the last rank
    Tensor b = on_gpu(n, dtype, me);
    comm.broadcast(b, R - 1);
    const Tensor host_b = b.clone();  // cudaMemcpy on the default stream waits for the blocking stream
    comm.synchronize();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(read(host_b, i), expected_value(R - 1, i, dtype));
  }
  // send/recv around a ring, even ranks sending first
  const int next = (me + 1) % R, previous = (me + R - 1) % R;
  Tensor mine = on_gpu(n, DType::f32, me), received = Tensor::zeros({n}, DType::f32, Device::cuda);
  if (me % 2 == 0) {
    comm.send(mine, next);
    comm.recv(received, previous);
  } else {
    comm.recv(received, previous);
    comm.send(mine, next);
  }
  comm.barrier();
  const Tensor host = received.clone();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(read(host, i), contribution(previous, i));
}

TEST_F(Nccl, MismatchedCallsFailOnEveryRank) {
  Communicator& comm = world();
  Tensor x = Tensor::zeros({comm.rank() == 0 ? 8 : 9}, DType::f32, Device::cuda);
  EXPECT_THROW(comm.all_reduce(x, ReduceOp::sum), CollectiveMismatch);
  Tensor y = on_gpu(4, DType::f32, comm.rank());
  comm.all_reduce(y, ReduceOp::sum);  // still usable
  comm.synchronize();
}

TEST_F(Nccl, MissingRankGivesATimeoutNotAHang) {
  CommunicatorOptions options;
  options.timeout = 2s;
  auto comm = std::make_unique<NcclCommunicator>(MPI_COMM_WORLD, "timeout test", options);
  Tensor x = on_gpu(1024, DType::f32, comm->rank());
  if (comm->rank() != 0) {
    // Rank 0 never joins. NCCL may set up its connections with the peers when the first
    // collective is enqueued: then the enqueue itself waits, and times out, instead of synchronize().
    EXPECT_THROW(
        {
          comm->all_reduce(x, ReduceOp::sum);
          comm->synchronize();
        },
        CommunicationTimeout);
    EXPECT_THROW(comm->all_reduce(x, ReduceOp::sum), std::runtime_error);  // broken now
  }
  comm.reset();  // rank 0: the final flush times out too, and aborts
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace linea

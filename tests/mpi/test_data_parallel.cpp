// DataParallelReducer under mpirun (2 and 4 ranks): on a toy least-squares problem, SGD with the
// global batch split over DP ranks (gradients averaged by the reducer) follows the same trajectory
// as one process on the whole batch, in every TP × DP layout of the world; the replicas stay
// bit-identical; bucket boundaries fall on parameter boundaries; buckets started during backward
// (gradients_ready) give the bits of a reduction after it.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/random.h"
#include "parallel/mpi_comm.h"
#include "parallel/process_grid.h"
#include "worker/data_parallel_reducer.h"

namespace linea {
namespace {

using namespace std::chrono_literals;

constexpr int kBatch = 8, kIn = 4, kOut = 3, kExtra = 5;

// The global batch: sample i has input x_i ∈ R^4, target y_i ∈ R^3 and target z_i ∈ R^5.
struct Batch {
  std::vector<double> x, y, z;
};

Batch make_batch() {
  Rng rng(7);
  Batch b;
  for (int i = 0; i < kBatch * kIn; ++i) b.x.push_back(rng.normal());
  for (int i = 0; i < kBatch * kOut; ++i) b.y.push_back(rng.normal());
  for (int i = 0; i < kBatch * kExtra; ++i) b.z.push_back(rng.normal());
  return b;
}

// Parameters W [3, 4], b [3], c [5].
void declare(ParameterSet& params) {
  params.declare("w", {kOut, kIn}, ParamRole::matrix, true);
  params.declare("b", {kOut}, ParamRole::vector, false);
  params.declare("c", {kExtra}, ParamRole::vector, false);
  params.finalize();
  Rng rng(3);
  fill_normal(params.values(), rng, 0.0, 0.5);
}

template <class T>
double value(const ParameterSet& p, int64_t i) {
  return p.values().data<T>()[i];
}

// Loss over samples [begin, end):  mean_i ½‖W x_i + b − y_i‖² + ½‖c − z_i‖²; writes its gradient
// (the mean over those samples) into params.grads() and returns the loss.
template <class T>
double loss_and_grad(ParameterSet& params, const Batch& batch, int begin, int end) {
  params.zero_grads();
  T* g = params.grads().data<T>();
  const int n = end - begin;
  double loss = 0;
  for (int i = begin; i < end; ++i) {
    for (int o = 0; o < kOut; ++o) {
      double r = value<T>(params, kOut * kIn + o) - batch.y[i * kOut + o];
      for (int k = 0; k < kIn; ++k) r += value<T>(params, o * kIn + k) * batch.x[i * kIn + k];
      loss += 0.5 * r * r / n;
      for (int k = 0; k < kIn; ++k) g[o * kIn + k] += static_cast<T>(r * batch.x[i * kIn + k] / n);
      g[kOut * kIn + o] += static_cast<T>(r / n);
    }
    for (int e = 0; e < kExtra; ++e) {
      const int64_t at = kOut * kIn + kOut + e;
      const double r = value<T>(params, at) - batch.z[i * kExtra + e];
      loss += 0.5 * r * r / n;
      g[at] += static_cast<T>(r / n);
    }
  }
  return loss;
}

template <class T>
void sgd_step(ParameterSet& params, double lr) {
  for (int64_t i = 0; i < params.numel(); ++i) {
    params.values().data<T>()[i] -= static_cast<T>(lr * params.grads().data<T>()[i]);
  }
}

template <class T>
void check_matches_one_process(MPI_Comm parent, int tp, int dp, int64_t bucket_bytes, double tolerance) {
  SCOPED_TRACE(std::string(dtype_name(dtype_of<T>())) + " tp=" + std::to_string(tp) + " dp=" + std::to_string(dp) +
               " bucket_bytes=" + std::to_string(bucket_bytes));
  CommunicatorOptions options;
  options.validate = true;
  options.timeout = 30s;
  ProcessGrid grid = ProcessGrid::create({tp, dp}, options, parent);
  const Batch batch = make_batch();
  ParameterSet replica(dtype_of<T>()), whole(dtype_of<T>());
  declare(replica);
  declare(whole);
  DataParallelReducer reducer(grid.comm(GridAxis::dp), replica, bucket_bytes);

  const int share = kBatch / dp, begin = grid.dp_rank() * share;
  constexpr double kLr = 0.1;
  for (int step = 0; step < 6; ++step) {
    // DP: this rank's share of the batch, gradients averaged over the DP group.
    Tensor loss = Tensor::empty({1}, DType::f64);
    loss.data<double>()[0] = loss_and_grad<T>(replica, batch, begin, begin + share);
    grid.comm(GridAxis::dp).all_reduce(loss, ReduceOp::avg);
    reducer.reduce(replica);
    sgd_step<T>(replica, kLr);
    // One process: the whole batch.
    const double whole_loss = loss_and_grad<T>(whole, batch, 0, kBatch);
    sgd_step<T>(whole, kLr);

    EXPECT_NEAR(loss.data<double>()[0], whole_loss, tolerance * whole_loss) << "step " << step;
    for (int64_t i = 0; i < whole.numel(); ++i) {
      ASSERT_NEAR(value<T>(replica, i), value<T>(whole, i), tolerance) << "step " << step << " element " << i;
    }
  }
  // Every rank holds the same replica, bit for bit.
  Communicator& world = grid.comm(GridAxis::world);
  Tensor all = Tensor::empty({world.size() * replica.numel()}, dtype_of<T>());
  world.all_gather(replica.values(), all);
  for (int r = 1; r < world.size(); ++r) {
    ASSERT_EQ(std::memcmp(all.data<T>() + r * replica.numel(), all.data<T>(), replica.values().nbytes()), 0)
        << "rank " << r << " differs from rank 0";
  }
}

TEST(DataParallelReducer, SplitBatchMatchesOneProcessInEveryLayout) {
  const int size = comm_size(MPI_COMM_WORLD);
  for (int tp = 1; tp <= size; ++tp) {
    if (size % tp != 0) continue;
    for (int64_t bucket_bytes : {int64_t{1}, int64_t{40}, int64_t{25} << 20}) {
      check_matches_one_process<double>(MPI_COMM_WORLD, tp, size / tp, bucket_bytes, 1e-12);
      check_matches_one_process<float>(MPI_COMM_WORLD, tp, size / tp, bucket_bytes, 2e-6);
    }
  }
  if (size == 4) {  // DP = 2 on each half of the world, and 2×1
    const MpiComm half = MpiComm::split(MPI_COMM_WORLD, comm_rank(MPI_COMM_WORLD) / 2, 0, "half");
    check_matches_one_process<double>(half.get(), 1, 2, 40, 1e-12);
    check_matches_one_process<double>(half.get(), 2, 1, 40, 1e-12);
  }
}

TEST(DataParallelReducer, BucketsFollowParameterBoundariesFromTheLast) {
  ProcessGrid grid = ProcessGrid::create({1, 0});
  ParameterSet params(DType::f32);
  declare(params);  // w: 12 elements at 0, b: 3 at 12, c: 5 at 15 (4 bytes each)
  using Bucket = DataParallelReducer::Bucket;
  auto plan = [&](int64_t bytes) { return DataParallelReducer(grid.comm(GridAxis::dp), params, bytes).buckets(); };
  auto equal = [](const std::vector<Bucket>& a, const std::vector<Bucket>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].offset != b[i].offset || a[i].numel != b[i].numel || a[i].first_param != b[i].first_param ||
          a[i].end_param != b[i].end_param) {
        return false;
      }
    }
    return true;
  };
  EXPECT_TRUE(equal(plan(1), {{15, 5, 2, 3}, {12, 3, 1, 2}, {0, 12, 0, 1}}));  // each parameter alone
  EXPECT_TRUE(equal(plan(32), {{12, 8, 1, 3}, {0, 12, 0, 1}}));                // b and c fill 32 bytes
  EXPECT_TRUE(equal(plan(1 << 20), {{0, 20, 0, 3}}));
  EXPECT_THROW(plan(0), std::invalid_argument);

  ParameterSet other(DType::f32);
  other.declare("w", {2}, ParamRole::vector, false);
  other.finalize();
  DataParallelReducer reducer(grid.comm(GridAxis::dp), params);
  EXPECT_THROW(reducer.reduce(other), std::invalid_argument);
}

TEST(DataParallelReducer, BucketsStartedDuringBackwardGiveTheSameBits) {
  ProcessGrid grid = ProcessGrid::create({1, 0});
  Communicator& dp = grid.comm(GridAxis::dp);
  ParameterSet overlapped(DType::f32), after(DType::f32);
  declare(overlapped);
  declare(after);
  for (ParameterSet* p : {&overlapped, &after}) {  // a different gradient on every rank
    for (int64_t i = 0; i < p->numel(); ++i) p->grads().data<float>()[i] = 0.1f * float(i) + 0.37f * float(dp.rank());
  }
  DataParallelReducer reducer(dp, overlapped, 1);  // each parameter a bucket: c, b, w
  DataParallelReducer plain(dp, after, 1);
  reducer.gradients_ready(0, 3);
  EXPECT_EQ(reducer.buckets_started(), 0u) << "not armed";
  reducer.overlap_next_backward();
  reducer.gradients_ready(1, 2);  // b before c: c's bucket goes first, so nothing starts
  EXPECT_EQ(reducer.buckets_started(), 0u);
  reducer.gradients_ready(2, 3);
  EXPECT_EQ(reducer.buckets_started(), 2u);
  EXPECT_THROW(reducer.gradients_ready(2, 4), std::invalid_argument);
  reducer.reduce(overlapped);
  EXPECT_EQ(reducer.buckets_started(), 0u) << "reset for the next step";
  plain.reduce(after);
  EXPECT_EQ(std::memcmp(overlapped.grads().raw(), after.grads().raw(), after.grads().nbytes()), 0);
  EXPECT_FALSE(dp.overlapping());
}

}  // namespace
}  // namespace linea

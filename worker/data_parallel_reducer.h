// DataParallelReducer: after backward, averages a ParameterSet's gradients over the data-parallel
// ranks, so that every replica steps with the gradient of the global batch:
//   g ← (1/DP) · Σ_r g_r
// (each rank's g is the mean over its equal share of the global batch, so this is the mean over all
// of it). The flat gradient buffer is reduced in buckets: runs of consecutive parameters of at most
// bucket_bytes, a larger parameter being a bucket of its own, so that no bucket boundary cuts a
// parameter. Buckets are formed from the last parameter backwards and reduced in that order, the
// order in which backward finishes them. With the MPI backend the result is bit-identical on every
// rank (parallel/mpi_communicator.h). With one DP rank the mean is the gradient itself (a GPU
// backend still runs its reductions).
//
// Overlap with backward: after overlap_next_backward(), each gradients_ready(first, end) call
// (Model::set_gradients_ready, made as each block's backward finishes) marks those parameters
// complete, and every bucket whose parameters are all complete is reduced at once, in bucket
// order, while backward goes on: on a GPU communicator its all-reduce runs on the communicator's
// stream after the gradient kernels enqueued so far (communicator.h, "Overlap"); on the MPI
// backend it runs there and then, with the same result as afterwards. reduce() then reduces the
// buckets left and, on a GPU, orders the default stream after every reduction, so that the
// optimizer reads the averaged gradients. Arm it before the last micro-batch of a step only: the
// gradients must be complete, not partial sums over micro-batches.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/parameters.h"
#include "parallel/communicator.h"

namespace linea {

class DataParallelReducer {
 public:
  struct Bucket {
    int64_t offset = 0;  // first element in the flat gradient buffer
    int64_t numel = 0;
    size_t first_param = 0;  // parameters [first_param, end_param) in declaration order
    size_t end_param = 0;
  };

  // `params` must be finalized; its gradients must live on dp.device().
  DataParallelReducer(Communicator& dp, const ParameterSet& params, int64_t bucket_bytes = int64_t{25} << 20);

  // Collective over the DP communicator: every DP rank calls it once per step, after backward.
  // `params` must be the set (or one laid out alike) given at construction.
  void reduce(ParameterSet& params);

  // Reduce buckets during the next backward, as gradients_ready() reports them complete.
  void overlap_next_backward();
  // Parameters [first_param, end_param) (declaration order) have their final gradients. Collective
  // over DP when it starts a reduction: every rank reports the same ranges in the same order (the
  // same model does). Ignored unless overlap_next_backward() was called since the last reduce().
  void gradients_ready(size_t first_param, size_t end_param);

  const std::vector<Bucket>& buckets() const { return buckets_; }  // in reduction order
  // Buckets reduced so far during this step's backward (for tests).
  size_t buckets_started() const { return next_bucket_; }

 private:
  void start_bucket(const Tensor& grads, const Bucket& bucket);

  Communicator& dp_;
  std::vector<Bucket> buckets_;
  int64_t numel_;
  size_t param_count_;
  DType dtype_;
  Tensor grads_;  // the gradients of the set given at construction (those overlap reduces)
  bool armed_ = false;
  std::vector<bool> ready_;  // per parameter, while armed
  size_t next_bucket_ = 0;   // buckets [0, next_bucket_) started this step
};

}  // namespace linea

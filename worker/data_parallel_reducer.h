// DataParallelReducer: after backward, averages a ParameterSet's gradients over the data-parallel
// ranks, so that every replica steps with the gradient of the global batch:
//   g ← (1/DP) · Σ_r g_r
// (each rank's g is the mean over its equal share of the global batch, so this is the mean over all
// of it). The flat gradient buffer is reduced in buckets: runs of consecutive parameters of at most
// bucket_bytes, a larger parameter being a bucket of its own, so that no bucket boundary cuts a
// parameter. Buckets are formed from the last parameter backwards and reduced in that order, the
// order in which backward finishes them. With the MPI backend the result is bit-identical on every
// rank (parallel/mpi_communicator.h). With one DP rank reduce() does nothing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "parallel/communicator.h"
#include "worker/parameters.h"

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

  const std::vector<Bucket>& buckets() const { return buckets_; }  // in reduction order

 private:
  Communicator& dp_;
  std::vector<Bucket> buckets_;
  int64_t numel_;
  size_t param_count_;
  DType dtype_;
};

}  // namespace linea

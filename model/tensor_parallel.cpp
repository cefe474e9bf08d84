#include "model/tensor_parallel.h"

#include <stdexcept>
#include <string>

namespace linea {

namespace {
std::string describe(const TensorParallel& tp) {
  return "tensor parallel (rank " + std::to_string(tp.rank) + " of " + std::to_string(tp.size) + ")";
}
}  // namespace

void TensorParallel::validate() const {
  if (size < 1 || rank < 0 || rank >= size) {
    throw std::invalid_argument(describe(*this) + ": expected a size >= 1 and a rank in [0, size)");
  }
  if (size == 1) return;
  if (!comm) throw std::invalid_argument(describe(*this) + ": a size above 1 needs a communicator");
  if (comm->size() != size || comm->rank() != rank) {
    throw std::invalid_argument(describe(*this) + ": communicator '" + comm->name() + "' is rank " +
                                std::to_string(comm->rank()) + " of " + std::to_string(comm->size()));
  }
}

ShardRange TensorParallel::split(int64_t extent, std::string_view key) const {
  if (extent < size) {
    throw std::invalid_argument("tensor parallel: " + std::string(key) + " = " + std::to_string(extent) +
                                " is smaller than the tensor-parallel size " + std::to_string(size) +
                                " (every rank needs at least one)");
  }
  const int64_t base = extent / size, extra = extent % size;
  return {rank * base + std::min<int64_t>(rank, extra), base + (rank < extra ? 1 : 0)};
}

ShardRange TensorParallel::split_evenly(int64_t extent, std::string_view key) const {
  if (extent % size != 0) {
    throw std::invalid_argument("tensor parallel: " + std::string(key) + " = " + std::to_string(extent) +
                                " does not split over " + std::to_string(size) +
                                " tensor-parallel ranks (it must be a multiple of the tensor-parallel size)");
  }
  return split(extent, key);
}

void TensorParallel::all_reduce_sum(const Tensor& x) const {
  if (size > 1) comm->all_reduce(x, ReduceOp::sum);
}

}  // namespace linea

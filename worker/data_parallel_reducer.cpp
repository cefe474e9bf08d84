#include "worker/data_parallel_reducer.h"

#include <stdexcept>
#include <string>

namespace linea {

DataParallelReducer::DataParallelReducer(Communicator& dp, const ParameterSet& params, int64_t bucket_bytes)
    : dp_(dp), numel_(params.numel()), param_count_(params.params().size()), dtype_(params.dtype()) {
  if (!params.finalized()) throw std::invalid_argument("DataParallelReducer: the ParameterSet is not finalized");
  if (bucket_bytes <= 0) {
    throw std::invalid_argument("DataParallelReducer: bucket_bytes must be > 0, got " + std::to_string(bucket_bytes));
  }
  if (params.grads().device() != dp.device()) {
    throw std::invalid_argument("DataParallelReducer: gradients are on " +
                                std::string(device_name(params.grads().device())) + " but communicator '" + dp.name() +
                                "' works on " + std::string(device_name(dp.device())));
  }
  const auto& list = params.params();
  const auto element = static_cast<int64_t>(dtype_size(params.dtype()));
  size_t end = list.size();
  while (end > 0) {
    // Grow the bucket backwards from parameter end−1 while it stays within bucket_bytes.
    size_t first = end - 1;
    int64_t numel = shape_numel(list[first].shape);
    while (first > 0 && (numel + shape_numel(list[first - 1].shape)) * element <= bucket_bytes) {
      --first;
      numel += shape_numel(list[first].shape);
    }
    buckets_.push_back(Bucket{list[first].offset, numel, first, end});
    end = first;
  }
}

void DataParallelReducer::reduce(ParameterSet& params) {
  if (!params.finalized() || params.numel() != numel_ || params.params().size() != param_count_ ||
      params.dtype() != dtype_) {
    throw std::invalid_argument("DataParallelReducer::reduce: the ParameterSet (" +
                                std::to_string(params.params().size()) + " parameters, " +
                                std::to_string(params.numel()) + " elements) is not the one it was planned for (" +
                                std::to_string(param_count_) + " parameters, " + std::to_string(numel_) + " elements)");
  }
  if (dp_.size() == 1) return;
  const Tensor grads = params.grads();
  for (const Bucket& bucket : buckets_) {
    dp_.all_reduce(grads.slice(bucket.offset, bucket.offset + bucket.numel), ReduceOp::avg);
  }
}

}  // namespace linea

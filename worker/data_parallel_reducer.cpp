#include "worker/data_parallel_reducer.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace linea {

DataParallelReducer::DataParallelReducer(Communicator& dp, const ParameterSet& params, int64_t bucket_bytes)
    : dp_(dp),
      numel_(params.numel()),
      param_count_(params.params().size()),
      dtype_(params.dtype()),
      grads_(params.grads()),
      ready_(params.params().size(), false) {
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
  const Tensor grads = armed_ ? grads_ : params.grads();
  for (; next_bucket_ < buckets_.size(); ++next_bucket_) start_bucket(grads, buckets_[next_bucket_]);
  dp_.end_overlap();
  armed_ = false;
  next_bucket_ = 0;
  std::fill(ready_.begin(), ready_.end(), false);
}

void DataParallelReducer::overlap_next_backward() {
  armed_ = true;
  next_bucket_ = 0;
  std::fill(ready_.begin(), ready_.end(), false);
}

void DataParallelReducer::gradients_ready(size_t first_param, size_t end_param) {
  if (first_param > end_param || end_param > param_count_) {
    throw std::invalid_argument("DataParallelReducer::gradients_ready: parameters [" + std::to_string(first_param) +
                                ", " + std::to_string(end_param) + ") of " + std::to_string(param_count_));
  }
  if (!armed_) return;
  std::fill(ready_.begin() + static_cast<std::ptrdiff_t>(first_param),
            ready_.begin() + static_cast<std::ptrdiff_t>(end_param), true);
  while (next_bucket_ < buckets_.size()) {
    const Bucket& bucket = buckets_[next_bucket_];
    for (size_t i = bucket.first_param; i < bucket.end_param; ++i) {
      if (!ready_[i]) return;
    }
    if (next_bucket_ == 0 && !dp_.overlapping()) dp_.begin_overlap();
    start_bucket(grads_, bucket);
    ++next_bucket_;
  }
}

void DataParallelReducer::start_bucket(const Tensor& grads, const Bucket& bucket) {
  dp_.all_reduce(grads.slice(bucket.offset, bucket.offset + bucket.numel), ReduceOp::avg);
}

}  // namespace linea

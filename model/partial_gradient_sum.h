// PartialGradientSum: completes, over the tensor-parallel group, the gradients of the replicated
// parameters whose backward on one rank adds only that rank's part (Parameter::partial_grad: a
// norm weight shared by heads the ranks hold different ones of; the first factor of a low-rank
// projection whose second factor is split).
//
// Gradients accumulate over micro-batches, so only what this micro-batch adds may be summed:
// begin() sets those gradients aside and zeroes them, backward adds each rank's part, finish()
// sums the parts over the group in one all-reduce and adds back what was set aside. Afterwards
// each such gradient is identical on every rank of the group.
#pragma once
#include <vector>

#include "model/parameters.h"
#include "model/tensor_parallel.h"

namespace linea {

class PartialGradientSum {
 public:
  PartialGradientSum() = default;  // nothing to sum
  // The partial_grad parameters of `params` (which must outlive this); none: begin/finish do nothing.
  explicit PartialGradientSum(ParameterSet& params);

  void begin();
  // Collective over tp (every rank of the group calls it after the same backward).
  void finish(const TensorParallel& tp);

  int64_t numel() const { return numel_; }  // elements summed by each finish()

 private:
  std::vector<Parameter*> params_;
  int64_t numel_ = 0;
  Tensor set_aside_, parts_;  // [numel], allocated by the first begin()
};

}  // namespace linea

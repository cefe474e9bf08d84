#include "model/lm_head_loss.h"

#include "kernels/ops.h"

namespace linea {

double lm_head_loss(StepContext& ctx, const TensorParallel& tp, const Tensor& x, const Parameter& head,
                    const Tensor& targets, double loss_scale, Tensor dx, Tensor dweight) {
  if (tp.size == 1) return ops::lm_head_cross_entropy(x, head.compute, targets, loss_scale, dx, dweight);
  const int64_t n = x.dim(0);
  const DType statistics = ctx.statistics_dtype();  // f32 in bf16 steps
  Tensor stats = ctx.scratch.alloc({2, n}, statistics);
  ops::lm_head_shard_statistics(stats, x, head.compute, targets, head.shard_offset);
  Tensor gathered = ctx.scratch.alloc({tp.size, 2, n}, statistics);
  tp.comm->all_gather(stats, gathered);
  Tensor lse = ctx.scratch.alloc({n}, statistics);
  const double loss_sum = ops::lm_head_combine_statistics(lse, gathered, targets);
  if (dx.defined()) {
    ops::lm_head_shard_backward(dx, dweight, x, head.compute, targets, head.shard_offset, lse, loss_scale);
    tp.all_reduce_sum(dx);
  }
  return loss_sum;
}

}  // namespace linea

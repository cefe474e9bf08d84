#include "model/full_width_rms_norm.h"

#include "kernels/random.h"

namespace linea {

FullWidthRMSNorm::FullWidthRMSNorm(ParameterSet& params, const std::string& name, int64_t width, ShardRange columns,
                                   ops::GateActivation act, double eps, const TensorParallel& tp)
    : width_(width),
      columns_(columns),
      act_(act),
      eps_(eps),
      tp_(tp),
      weight_(params.declare(name + ".weight", {width}, ParamRole::vector, /*weight_decay=*/false)) {}

void FullWidthRMSNorm::init() { fill_constant(weight_->value, 1.0); }

Tensor FullWidthRMSNorm::gather(StepContext& ctx, const Tensor& local) const {
  if (tp_.size == 1) return local;
  Tensor full = ctx.scratch.alloc({local.dim(0), width_}, local.dtype());
  full.zero();
  ops::column_place(full, local, columns_.begin);
  tp_.all_reduce_sum(full);
  return full;
}

void FullWidthRMSNorm::keep_columns(const Tensor& full, Tensor local) const {
  if (tp_.size > 1) ops::column_slice(local, full, columns_.begin);
}

void FullWidthRMSNorm::forward(StepContext& ctx, const Tensor& x, const Tensor& z, Tensor y) {
  const int64_t n = x.dim(0);
  const Tensor gate = act_ == ops::GateActivation::none ? Tensor() : gather(ctx, z);
  Tensor full_y = tp_.size == 1 ? y : ctx.temporary({n, width_});
  Tensor rstd = ctx.scratch.alloc({n, 1}, ctx.statistics_dtype());
  ops::gated_rmsnorm_forward(full_y, rstd, gather(ctx, x), gate, weight_->compute, 1, act_, eps_);
  keep_columns(full_y, y);
}

void FullWidthRMSNorm::backward(StepContext& ctx, const Tensor& x, const Tensor& z, const Tensor& dy, Tensor dx,
                                Tensor dz) {
  const int64_t n = x.dim(0);
  const bool gated = act_ != ops::GateActivation::none;
  const Tensor full_x = gather(ctx, x), gate = gated ? gather(ctx, z) : Tensor();
  Tensor rstd = ctx.scratch.alloc({n, 1}, ctx.statistics_dtype());
  Tensor normed = ctx.temporary({n, width_});  // the forward again, for its rstd
  ops::gated_rmsnorm_forward(normed, rstd, full_x, gate, weight_->compute, 1, act_, eps_);
  Tensor full_dx = tp_.size == 1 ? dx : ctx.temporary({n, width_});
  Tensor full_dz = !gated ? Tensor() : tp_.size == 1 ? dz : ctx.temporary({n, width_});
  ops::gated_rmsnorm_backward(full_dx, full_dz, weight_->compute_grad, gather(ctx, dy), full_x, gate, weight_->compute,
                              rstd, 1, act_);
  keep_columns(full_dx, dx);
  if (gated) keep_columns(full_dz, dz);
}

}  // namespace linea

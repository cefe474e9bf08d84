#include "kernels/cpu/lm_head_cross_entropy.h"

#include <cmath>
#include <limits>

#include "kernels/op_arguments.h"
#include "kernels/ops.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/ops.h"
#endif

namespace linea::ops {

double lm_head_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& targets, double loss_scale, Tensor dx,
                             Tensor dweight) {
  OpArguments args("lm_head_cross_entropy");
  args.floating(x, "x", {kAnyDim, kAnyDim});
  args.floating(weight, "weight", {kAnyDim, x.dim(1)});
  const int64_t n = x.dim(0), d = x.dim(1), v = weight.dim(0);
  args.require(v >= 1, "weight", "expected a vocabulary of at least one row, got " + weight.describe());
  args.indices(targets, "targets", {n})
      .optional_floating(dx, "dx", x.shape())
      .optional_floating(dweight, "dweight", weight.shape());
  args.require(std::isfinite(loss_scale), "loss_scale", "expected a finite value, got " + std::to_string(loss_scale));
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) {
    args.require_indices_in_range(targets, "targets", 0, v, -1);
    return cuda::lm_head_cross_entropy(x, weight, targets, loss_scale, dx, dweight, cuda::lm_head_default_tiling(n, v));
  }
#endif
  return args.dispatch([&](auto zero) {
    using T = decltype(zero);
    args.require_indices_in_range(targets, "targets", 0, v, -1);
    return cpu::lm_head_cross_entropy<T>(x.data<T>(), weight.data<T>(), targets.data<int32_t>(), n, d, v,
                                         static_cast<T>(loss_scale), dx.defined() ? dx.data<T>() : nullptr,
                                         dweight.defined() ? dweight.data<T>() : nullptr,
                                         cpu::lm_head_rows_per_block(v));
  });
}

namespace {

// The checks the two per-shard steps share: x [N, D], a shard of at least one row [V_r, D] starting
// at vocab_begin ≥ 0, and targets in the full vocabulary or −1 (their upper end is the caller's to
// check: no rank knows the whole vocabulary's size from its shard).
void check_shard(OpArguments& args, const Tensor& x, const Tensor& weight, const Tensor& targets, int64_t vocab_begin) {
  args.floating(x, "x", {kAnyDim, kAnyDim});
  args.floating(weight, "weight", {kAnyDim, x.dim(1)});
  args.require(weight.dim(0) >= 1, "weight",
               "expected a vocabulary shard of at least one row, got " + weight.describe());
  args.require(vocab_begin >= 0, "vocab_begin", "expected a row index >= 0, got " + std::to_string(vocab_begin));
  args.indices(targets, "targets", {x.dim(0)});
}

void check_targets(const OpArguments& args, const Tensor& targets) {
  args.require_indices_in_range(targets, "targets", 0, std::numeric_limits<int32_t>::max() + int64_t{1}, -1);
}

}  // namespace

void lm_head_shard_statistics(Tensor stats, const Tensor& x, const Tensor& weight, const Tensor& targets,
                              int64_t vocab_begin) {
  OpArguments args("lm_head_shard_statistics");
  check_shard(args, x, weight, targets, vocab_begin);
  const int64_t n = x.dim(0), d = x.dim(1), v = weight.dim(0);
  args.statistics(stats, "stats", {2, n});
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) {
    check_targets(args, targets);
    return cuda::lm_head_shard_statistics(stats, x, weight, targets, vocab_begin, cuda::lm_head_default_tiling(n, v));
  }
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    check_targets(args, targets);
    T* s = stats.data<T>();
    cpu::lm_head_shard_statistics<T>(x.data<T>(), weight.data<T>(), targets.data<int32_t>(), n, d, v, vocab_begin, s,
                                     s + n, cpu::lm_head_rows_per_block(v));
  });
}

double lm_head_combine_statistics(Tensor lse, const Tensor& gathered_stats, const Tensor& targets) {
  OpArguments args("lm_head_combine_statistics");
  args.floating(gathered_stats, "gathered_stats", {kAnyDim, 2, kAnyDim});
  const int64_t ranks = gathered_stats.dim(0), n = gathered_stats.dim(2);
  args.require(ranks >= 1, "gathered_stats",
               "expected the statistics of at least one rank, got " + gathered_stats.describe());
  args.floating(lse, "lse", {n}).indices(targets, "targets", {n});
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) {
    args.require(gathered_stats.dtype() == DType::f32, "gathered_stats",
                 "expected f32 statistics on cuda, got " + gathered_stats.describe());
    check_targets(args, targets);
    return cuda::lm_head_combine_statistics(lse, gathered_stats, targets);
  }
#endif
  return args.dispatch([&](auto zero) {
    using T = decltype(zero);
    check_targets(args, targets);
    return cpu::lm_head_combine_statistics<T>(gathered_stats.data<T>(), targets.data<int32_t>(), n, ranks,
                                              lse.data<T>());
  });
}

void lm_head_shard_backward(Tensor dx, Tensor dweight, const Tensor& x, const Tensor& weight, const Tensor& targets,
                            int64_t vocab_begin, const Tensor& lse, double loss_scale) {
  OpArguments args("lm_head_shard_backward");
  check_shard(args, x, weight, targets, vocab_begin);
  const int64_t n = x.dim(0), d = x.dim(1), v = weight.dim(0);
  args.statistics(lse, "lse", {n})
      .optional_floating(dx, "dx", x.shape())
      .optional_floating(dweight, "dweight", weight.shape());
  args.require(std::isfinite(loss_scale), "loss_scale", "expected a finite value, got " + std::to_string(loss_scale));
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) {
    check_targets(args, targets);
    return cuda::lm_head_shard_backward(dx, dweight, x, weight, targets, vocab_begin, lse, loss_scale,
                                        cuda::lm_head_default_tiling(n, v));
  }
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    check_targets(args, targets);
    cpu::lm_head_shard_backward<T>(x.data<T>(), weight.data<T>(), targets.data<int32_t>(), n, d, v, vocab_begin,
                                   lse.data<T>(), static_cast<T>(loss_scale), dx.defined() ? dx.data<T>() : nullptr,
                                   dweight.defined() ? dweight.data<T>() : nullptr, cpu::lm_head_rows_per_block(v));
  });
}

}  // namespace linea::ops

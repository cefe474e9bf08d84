// Global gradient-norm clipping over a ParameterSet's flat gradient buffer.
//
// The norm is ‖g‖₂ = sqrt(Σ g²), summed in f64 over fixed blocks of the buffer and then over the
// blocks in order, so it is bit-identical whatever the number of OpenMP threads. Gradients on a
// GPU are summed there (f64, fixed tree: identical from run to run) and scaled in place. Under data
// parallelism the gradients are averaged first (every replica then has the same norm); under
// tensor parallelism the norm of the logical gradients is the TP form of grad_sum_of_squares
// below, and clipping scales with scale_grads().
#pragma once
#include <vector>

#include "model/parameters.h"
#include "model/tensor_parallel.h"

namespace linea {

// The sums of squares and the scaling are ops::sums_of_squares and ops::scale
// (kernels/optimizer_math.h).

// Σ g² over all gradients (f64).
double grad_sum_of_squares(const ParameterSet& params);
double grad_norm(const ParameterSet& params);
// Σ g² over the logical gradients of a tensor-parallel model: the shards' sums added over the TP
// group, the replicated parameters (identical on every rank) counted once. Collective over tp;
// the same value on every rank; grad_sum_of_squares(params) at tp.size = 1.
double grad_sum_of_squares(const ParameterSet& params, const TensorParallel& tp);
// g ← factor · g (also how accumulated micro-batch gradients are averaged).
void scale_grads(ParameterSet& params, double factor);
// When max_norm > 0 and ‖g‖ > max_norm: g ← g · max_norm / (‖g‖ + 1e-6) (torch's clip_grad_norm_).
// Returns ‖g‖ before clipping. A non-finite norm leaves the gradients untouched (the caller should
// skip the step).
double clip_grad_norm(ParameterSet& params, double max_norm);

}  // namespace linea

// The optimizer's elementwise updates and reductions as ops: argument checks, then dispatch on
// device and dtype to the CPU loops (kernels/cpu/optimizer_math.h) or the CUDA kernels
// (kernels/cuda/optimizer_math.h), which round alike (kernels/cuda/optimizer_math.h says how).
// The operands of one call share a dtype (f32 or f64 on the CPU, f32 on CUDA), a device and an
// element count (their shapes may differ: a parameter and its flat optimizer buffer); anything
// else throws std::invalid_argument naming the op and the operand. Callers: AdamW and Muon
// (worker/adamw.h, muon.h), gradient clipping (worker/grad_clip.h).
#pragma once
#include <vector>

#include "kernels/adamw_coefficients.h"
#include "kernels/tensor.h"

namespace linea::ops {

// With g = grad·c.grad_scale (the product in f64 rounded once to the dtype, as scale rounds it; the
// gradients in memory are left as they are):
// θ ← θ·decay; m ← β1·m + (1 − β1)·g; v ← β2·v + (1 − β2)·g²; θ ← θ − step_size·m / (sqrt(v)/bc2 + eps)
void adamw_update(const Tensor& theta, const Tensor& grad, const Tensor& m, const Tensor& v,
                  const AdamWCoefficients& c);
// With g = grad·grad_scale rounded as in adamw_update: B ← μ·B + g;  u = g + μ·B (the Nesterov
// look-ahead, written to u)
void nesterov_momentum(const Tensor& momentum, const Tensor& u, const Tensor& grad, double mu, double grad_scale = 1);
// θ ← θ·decay_factor − scale·o
void decay_and_subtract(const Tensor& theta, const Tensor& o, double decay_factor, double scale);
// x ← x·factor, the product in f64 rounded once to x's dtype
void scale(const Tensor& x, double factor);
// Σ x² of each tensor, accumulated in f64 in an order fixed by its size alone (the same for any
// number of threads); all on one device (on CUDA: one synchronisation for all).
std::vector<double> sums_of_squares(const std::vector<Tensor>& xs);

}  // namespace linea::ops

// The optimizer's elementwise updates and reductions on the GPU: the CUDA side of the ops of
// kernels/optimizer_math.h, which call these for f32 tensors on the current CUDA device.
//
// Same math as the CPU loops, in the same f32 operation order and with every product, sum,
// quotient and square root rounded on its own (no fused multiply-add), so that the elementwise
// updates give the CPU's f32 bits. sum_of_squares adds in f64 in a fixed tree (fixed grid, fixed
// order of partial sums), so it is the same on every run; it differs from the CPU's blocked sum
// only by f64 rounding. Everything runs on the default stream; sums_of_squares returns after
// copying its results to the host (one synchronisation for all of them).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/adamw_coefficients.h"

namespace linea::cuda {

// g = float(double(grad)·c.grad_scale);
// θ ← θ·decay; m ← β1·m + (1 − β1)·g; v ← β2·v + (1 − β2)·g²; θ ← θ − step_size·m / (sqrt(v)/bc2 + eps)
void adamw_update(float* theta, const float* grad, float* m, float* v, int64_t n, const AdamWCoefficients& c);
// g = float(double(grad)·grad_scale);  B ← μ·B + g;  u = g + μ·B
void nesterov_momentum(float* momentum, float* u, const float* grad, int64_t n, double mu, double grad_scale);
// θ ← θ·decay_factor − scale·o
void decay_and_subtract(float* theta, const float* o, int64_t n, double decay_factor, double scale);
// x ← float(double(x)·factor)
void scale(float* x, int64_t n, double factor);
// Σ x² of each of the f32 runs xs[i] = (pointer, count), in f64, with one copy to the host for all.
void sums_of_squares(const std::vector<std::pair<const float*, int64_t>>& xs, double* out);
// The same sum, left on the device in *total (no synchronisation); `partials` holds
// sum_of_squares_partials() doubles of device memory.
int64_t sum_of_squares_partials();
void sum_of_squares_to_device(const float* x, int64_t n, double* partials, double* total);

}  // namespace linea::cuda

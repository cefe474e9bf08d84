// The CPU loops of the optimizer ops (kernels/optimizer_math.h, which states the math), over raw
// arrays of n elements; templates over float and double. The elementwise loops split over OpenMP
// threads without changing any element's arithmetic; sum_of_squares adds fixed blocks of 2^14
// elements, then the blocks in order, so its result does not depend on the number of threads.
#pragma once
#include <cstdint>

#include "kernels/adamw_coefficients.h"

namespace linea::cpu {

template <class T>
void adamw_update(T* theta, const T* grad, T* m, T* v, int64_t n, const AdamWCoefficients& c);
template <class T>
void nesterov_momentum(T* momentum, T* u, const T* grad, int64_t n, double mu, double grad_scale);
template <class T>
void decay_and_subtract(T* theta, const T* o, int64_t n, double decay_factor, double scale);
template <class T>
void scale(T* x, int64_t n, double factor);
template <class T>
double sum_of_squares(const T* x, int64_t n);

}  // namespace linea::cpu

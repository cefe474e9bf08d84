#include "kernels/cpu/rmsnorm.h"

#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/row_blocks.h"

namespace linea::cpu {

namespace {
// Calls f(gate, gate_derivative, gated) for `act`: gate(z, i) = act(z_i), which is 1 (and z unread,
// possibly null) when there is no gate; gate_derivative(z, i) = act'(z_i), only called when gated.
// `gated` is a compile-time bool, so that the loops of f vectorize without a branch per element.
template <class T, class F>
void with_gate(ops::GateActivation act, F f) {
  switch (act) {
    case ops::GateActivation::silu:
      return f([](const T* z, int64_t i) { return silu(z[i]); }, [](const T* z, int64_t i) { return silu_grad(z[i]); },
               std::true_type{});
    case ops::GateActivation::sigmoid:
      return f([](const T* z, int64_t i) { return sigmoid(z[i]); },
               [](const T* z, int64_t i) {
                 const T s = sigmoid(z[i]);
                 return s * (T(1) - s);
               },
               std::true_type{});
    case ops::GateActivation::none: break;
  }
  return f([](const T*, int64_t) { return T(1); }, [](const T*, int64_t) { return T(0); }, std::false_type{});
}

// r = 1 / sqrt(Σ_j o_j² / dim + eps) of the group at og (the forward's, and the backward's recomputation).
template <class T>
T group_rstd(const T* og, int64_t dim, T eps) {
  T sum_sq = 0;
#pragma omp simd reduction(+ : sum_sq)
  for (int64_t j = 0; j < dim; ++j) sum_sq += og[j] * og[j];
  return T(1) / std::sqrt(sum_sq / static_cast<T>(dim) + eps);
}
}  // namespace

template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* o, const T* z, const T* weight, int64_t rows, int64_t heads, int64_t dim,
                     ops::GateActivation act, T eps, const T* residual, T* sum) {
  const int64_t groups = rows * heads;
  with_gate<T>(act, [&](auto gate, auto, auto) {
#pragma omp parallel for schedule(static) if (worth_parallel(groups * dim))
    for (int64_t g = 0; g < groups; ++g) {
      const T* og = o + g * dim;
      if (residual != nullptr) {
        T* sg = sum + g * dim;
#pragma omp simd
        for (int64_t j = 0; j < dim; ++j) sg[j] = og[j] + residual[g * dim + j];
        og = sg;
      }
      const T r = group_rstd(og, dim, eps);
      rstd[g] = r;
      T* yg = out + g * dim;
#pragma omp simd
      for (int64_t j = 0; j < dim; ++j) yg[j] = og[j] * r * weight[j] * gate(z, g * dim + j);
    }
  });
}

template <class T>
void rmsnorm_backward(T* d_o, T* dz, T* dweight, const T* dout, const T* o, const T* z, const T* weight, const T* rstd,
                      int64_t rows, int64_t heads, int64_t dim, ops::GateActivation act, const T* residual,
                      T* recompute_out, T eps) {
  with_gate<T>(act, [&](auto gate, auto gate_derivative, auto gated) {
    constexpr bool kGated = decltype(gated)::value;
    accumulate_over_row_blocks(rows, dim, dweight, [&](int64_t begin, int64_t end, T* dweight_partial) {
      // du of the current group, kept until d_o is known (not in d_o: residual may alias d_o).
      std::vector<T> du_row(static_cast<size_t>(dim));
      T* du = du_row.data();
      for (int64_t g = begin * heads; g < end * heads; ++g) {
        const int64_t base = g * dim;
        const T r = recompute_out != nullptr ? group_rstd(o + base, dim, eps) : rstd[g];
        // c = (1/dim) Σ_i γ_i · du_i · ô_i
        T c = 0;
#pragma omp simd reduction(+ : c)
        for (int64_t j = 0; j < dim; ++j) {
          du[j] = dout[base + j] * gate(z, base + j);
          const T o_hat = o[base + j] * r;
          c += weight[j] * du[j] * o_hat;
          dweight_partial[j] += du[j] * o_hat;
          if constexpr (kGated) dz[base + j] = dout[base + j] * o_hat * weight[j] * gate_derivative(z, base + j);
        }
        c /= static_cast<T>(dim);
        if (residual == nullptr) {
#pragma omp simd
          for (int64_t j = 0; j < dim; ++j) d_o[base + j] = r * (weight[j] * du[j] - o[base + j] * r * c);
        } else {
#pragma omp simd
          for (int64_t j = 0; j < dim; ++j) {
            d_o[base + j] = r * (weight[j] * du[j] - o[base + j] * r * c) + residual[base + j];
          }
        }
        if (recompute_out != nullptr) {
#pragma omp simd
          for (int64_t j = 0; j < dim; ++j) recompute_out[base + j] = o[base + j] * r * weight[j] * gate(z, base + j);
        }
      }
    });
  });
}
template void rmsnorm_forward<float>(float*, float*, const float*, const float*, const float*, int64_t, int64_t,
                                     int64_t, ops::GateActivation, float, const float*, float*);
template void rmsnorm_forward<double>(double*, double*, const double*, const double*, const double*, int64_t, int64_t,
                                      int64_t, ops::GateActivation, double, const double*, double*);
template void rmsnorm_backward<float>(float*, float*, float*, const float*, const float*, const float*, const float*,
                                      const float*, int64_t, int64_t, int64_t, ops::GateActivation, const float*,
                                      float*, float);
template void rmsnorm_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                       const double*, const double*, int64_t, int64_t, int64_t, ops::GateActivation,
                                       const double*, double*, double);

}  // namespace linea::cpu

#include "kernels/cpu/forget_gates.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/row_blocks.h"

namespace linea::cpu {

namespace {

// log σ(x) = −softplus(−x)
template <class T>
T log_sigmoid(T x) {
  return -softplus(-x);
}

// log(e^a + e^b), with b = −∞ allowed.
template <class T>
T log_add_exp(T a, T b) {
  const T m = a > b ? a : b;
  return m + std::log1p(std::exp(-std::abs(a - b)));
}

// The gate before the normalizer, and its two partial derivatives.
template <class T>
struct ForgetGate {
  T value, d_logit, d_lower_bound;
};

template <class T>
ForgetGate<T> forget_gate(T x, T lb) {
  const T through_sigmoid = std::log1p(-lb) + log_sigmoid(x);
  const T log_lb = lb > 0 ? std::log(lb) : -std::numeric_limits<T>::infinity();
  const T gl = log_lb == -std::numeric_limits<T>::infinity() ? through_sigmoid : log_add_exp(through_sigmoid, log_lb);
  return {gl, std::exp(through_sigmoid - gl) * sigmoid(-x), std::exp(log_sigmoid(-x) - gl)};
}

}  // namespace

template <class T>
void log_forget_gate_forward(T* g, const T* x, const T* lower_bound, int64_t rows, int64_t width, T normalizer) {
#pragma omp parallel for schedule(static) if (worth_parallel(rows * width))
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t c = 0; c < width; ++c) {
      const int64_t i = n * width + c;
      g[i] = forget_gate(x[i], lower_bound ? lower_bound[c] : T(0)).value / normalizer;
    }
  }
}

template <class T>
void log_forget_gate_backward(T* dx, T* dlower_bound, const T* dg, const T* x, const T* lower_bound, int64_t rows,
                              int64_t width, T normalizer) {
  // dlower_bound first: it reads dg, which the caller may have handed in as dx's storage.
  if (dlower_bound) {
    accumulate_over_row_blocks(rows, width, dlower_bound, [&](int64_t begin, int64_t end, T* partial) {
      for (int64_t n = begin; n < end; ++n) {
        for (int64_t c = 0; c < width; ++c) {
          const int64_t i = n * width + c;
          partial[c] += dg[i] / normalizer * forget_gate(x[i], lower_bound[c]).d_lower_bound;
        }
      }
    });
  }
#pragma omp parallel for schedule(static) if (worth_parallel(rows * width))
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t c = 0; c < width; ++c) {
      const int64_t i = n * width + c;
      dx[i] = dg[i] / normalizer * forget_gate(x[i], lower_bound ? lower_bound[c] : T(0)).d_logit;
    }
  }
}

template <class T>
void forget_input_forward(T* out, const T* i, const T* g, int64_t n) {
  for_each_block(n, [=](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t e = begin; e < end; ++e) out[e] = silu(i[e]) * -std::expm1(g[e]);
  });
}

template <class T>
void forget_input_backward(T* di, T* dg, const T* dout, const T* i, const T* g, int64_t n) {
  for_each_block(n, [=](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e) {
      const T d = dout[e];  // dout may share storage with di or dg
      dg[e] = -d * silu(i[e]) * std::exp(g[e]);
      di[e] = d * -std::expm1(g[e]) * silu_grad(i[e]);
    }
  });
}

template <class T>
void exp_decay_forward(T* g, const T* w, int64_t n) {
  for_each_block(n, [=](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t e = begin; e < end; ++e) g[e] = -std::exp(w[e]);
  });
}

template <class T>
void exp_decay_backward(T* dw, const T* dg, const T* g, int64_t n) {
  for_each_block(n, [=](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t e = begin; e < end; ++e) dw[e] = dg[e] * g[e];
  });
}

template <class T>
void ssd_gate_forward(T* g, T* delta, const T* dt, const T* A_log, const T* dt_bias, int64_t rows, int64_t heads) {
#pragma omp parallel for schedule(static) if (worth_parallel(rows * heads))
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t i = n * heads + h;
      delta[i] = softplus(dt[i] + dt_bias[h]);
      g[i] = -std::exp(A_log[h]) * delta[i];
    }
  }
}

template <class T>
void ssd_gate_backward(T* ddt, T* dA_log, T* ddt_bias, const T* dg, const T* ddelta, const T* dt, const T* A_log,
                       const T* dt_bias, int64_t rows, int64_t heads) {
  accumulate_over_row_blocks(rows, heads, dA_log, [&](int64_t begin, int64_t end, T* partial) {
    for (int64_t n = begin; n < end; ++n) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t i = n * heads + h;
        partial[h] += dg[i] * (-std::exp(A_log[h]) * softplus(dt[i] + dt_bias[h]));
      }
    }
  });
#pragma omp parallel for schedule(static) if (worth_parallel(rows * heads))
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t i = n * heads + h;
      ddt[i] = (ddelta[i] - std::exp(A_log[h]) * dg[i]) * sigmoid(dt[i] + dt_bias[h]);
    }
  }
  accumulate_over_row_blocks(rows, heads, ddt_bias, [&](int64_t begin, int64_t end, T* partial) {
    for (int64_t n = begin; n < end; ++n) {
      for (int64_t h = 0; h < heads; ++h) partial[h] += ddt[n * heads + h];
    }
  });
}

namespace {
// p[m] = softmax over the L layers of channel c of Γ, into p (L values).
template <class T>
void layer_softmax(const T* gamma, int64_t layers, int64_t width, int64_t c, T* p) {
  T top = gamma[c];
  for (int64_t m = 1; m < layers; ++m) top = std::max(top, gamma[m * width + c]);
  T sum = 0;
  for (int64_t m = 0; m < layers; ++m) sum += p[m] = std::exp(gamma[m * width + c] - top);
  for (int64_t m = 0; m < layers; ++m) p[m] /= sum;
}
}  // namespace

template <class T>
void layer_lower_bound_forward(T* lower_bound, const T* gamma, int64_t layers, int64_t width, int64_t layer) {
  std::vector<T> p(static_cast<size_t>(layers));
  for (int64_t c = 0; c < width; ++c) {
    layer_softmax(gamma, layers, width, c, p.data());
    T sum = 0;
    for (int64_t m = 1; m <= layer; ++m) sum += p[m];
    lower_bound[c] = sum;
  }
}

template <class T>
void layer_lower_bound_backward(T* dgamma, const T* dlower_bound, const T* gamma, int64_t layers, int64_t width,
                                int64_t layer) {
  std::vector<T> p(static_cast<size_t>(layers));
  for (int64_t c = 0; c < width; ++c) {
    layer_softmax(gamma, layers, width, c, p.data());
    T weighted = 0;  // Σ_m p_m dp_m
    for (int64_t m = 1; m <= layer; ++m) weighted += p[m] * dlower_bound[c];
    for (int64_t j = 0; j < layers; ++j) {
      const T dp = j >= 1 && j <= layer ? dlower_bound[c] : T(0);
      dgamma[j * width + c] += p[j] * (dp - weighted);
    }
  }
}

#define LINEA_FORGET_GATES(T)                                                                                         \
  template void log_forget_gate_forward<T>(T*, const T*, const T*, int64_t, int64_t, T);                              \
  template void log_forget_gate_backward<T>(T*, T*, const T*, const T*, const T*, int64_t, int64_t, T);               \
  template void forget_input_forward<T>(T*, const T*, const T*, int64_t);                                             \
  template void forget_input_backward<T>(T*, T*, const T*, const T*, const T*, int64_t);                              \
  template void exp_decay_forward<T>(T*, const T*, int64_t);                                                          \
  template void exp_decay_backward<T>(T*, const T*, const T*, int64_t);                                               \
  template void ssd_gate_forward<T>(T*, T*, const T*, const T*, const T*, int64_t, int64_t);                          \
  template void ssd_gate_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, int64_t, int64_t); \
  template void layer_lower_bound_forward<T>(T*, const T*, int64_t, int64_t, int64_t);                                \
  template void layer_lower_bound_backward<T>(T*, const T*, const T*, int64_t, int64_t, int64_t);
LINEA_FORGET_GATES(float)
LINEA_FORGET_GATES(double)
#undef LINEA_FORGET_GATES

}  // namespace linea::cpu

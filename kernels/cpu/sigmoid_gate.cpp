#include "kernels/cpu/sigmoid_gate.h"

#include "kernels/cpu/activations.h"
#include "kernels/cpu/parallel.h"

namespace linea::cpu {

template <class T>
void sigmoid_gate_forward(T* beta, const T* logits, int64_t n, T scale) {
  for_each_block(n, [=](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) beta[i] = scale * sigmoid(logits[i]);
  });
}

template <class T>
void sigmoid_gate_backward(T* dlogits, const T* dbeta, const T* beta, int64_t n, T scale) {
  for_each_block(n, [=](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) dlogits[i] = dbeta[i] * beta[i] * (T(1) - beta[i] / scale);
  });
}

template void sigmoid_gate_forward<float>(float*, const float*, int64_t, float);
template void sigmoid_gate_forward<double>(double*, const double*, int64_t, double);
template void sigmoid_gate_backward<float>(float*, const float*, const float*, int64_t, float);
template void sigmoid_gate_backward<double>(double*, const double*, const double*, int64_t, double);

}  // namespace linea::cpu

// L2 normalisation of groups of `dim` channels (one group per head; reference/mixers.md §1.0):
//   r = 1 / sqrt(Σ_j x_j² + eps)   (eps inside the sqrt of the sum; saved as rstd[group])
//   y_j = x_j · r
// Backward from the saved output and rstd:  dx_j = r · (dy_j − y_j · Σ_i dy_i · y_i)
#pragma once
#include <cstdint>

namespace linea::cpu {

template <class T>
void l2norm_forward(T* out, T* rstd, const T* x, int64_t groups, int64_t dim, T eps);
template <class T>
void l2norm_backward(T* dx, const T* dout, const T* out, const T* rstd, int64_t groups, int64_t dim);

}  // namespace linea::cpu

// The constants of one AdamW step (worker/adamw.h), shared by the CPU loop and the CUDA kernel of
// ops::adamw_update (kernels/optimizer_math.h).
#pragma once

namespace linea {

// The constants of one AdamW step t (1-based) for one parameter.
struct AdamWCoefficients {
  double decay_factor = 1;  // 1 − lr·λ (1 without weight decay)
  double beta1 = 0, beta2 = 0;
  double step_size = 0;              // lr / (1 − β1^t)
  double bias_correction2_sqrt = 0;  // sqrt(1 − β2^t)
  double eps = 0;
  double grad_scale = 1;  // g is read as round(double(g)·grad_scale) (the gradient clip's factor)
};

}  // namespace linea

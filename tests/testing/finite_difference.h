// Central finite differences for checking hand-written backward passes in f64.
#pragma once
#include <functional>

#include "kernels/random.h"
#include "kernels/tensor.h"

namespace linea::testing {

struct GradCheck {
  double max_abs_err = 0;  // max |analytic − numeric| over checked entries
  double max_rel_err = 0;  // max over entries of the relative error defined at gradcheck()
  int64_t checked = 0;
};

// Perturbs up to `max_entries` entries of the f64 CPU tensor `input` (all of them when it has fewer,
// otherwise a random sample) by ±eps, evaluates `loss` (which must read `input`) and compares
// (L(x+eps) − L(x−eps)) / 2eps with `analytic` (same shape, f64). The relative error of an entry
// is |a − n| / max(|a|, |n|, floor) with floor = 1e-6, so tiny gradients are compared absolutely.
GradCheck gradcheck(const std::function<double()>& loss, Tensor input, const Tensor& analytic,
                    int64_t max_entries = 64, double eps = 1e-6, uint64_t seed = 1);

// Σ_i a_i · b_i over two f64 CPU tensors of equal size (the usual "loss = Σ out ⊙ dout").
double dot(const Tensor& a, const Tensor& b);

}  // namespace linea::testing

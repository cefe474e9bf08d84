// Finite-difference checks of model modules (a layer's hand-written backward in f64): the input
// gradient and every parameter tensor (a sample of entries of each), with loss = Σ y ⊙ r for a
// fixed random r.
#pragma once
#include <gtest/gtest.h>

#include <functional>

#include "kernels/arena.h"
#include "model/parameters.h"
#include "model/step_context.h"
#include "tests/testing/kernel_test.h"

namespace linea::testing {

using Forward = std::function<Tensor(StepContext&, const Tensor&)>;
// Backward gets the forward's input again (the modules keep no view of it).
using Backward = std::function<void(StepContext&, const Tensor& x, const Tensor& dy, Tensor dx)>;

// Documents of 5, 4 and 70 tokens: boundaries inside the batch and a chunk boundary at 64.
inline SeqLayout packed_layout() { return SeqLayout{{0, 5, 9, 79}}; }

// Gives every parameter a random but sensible value: the module's own init with a large std (so
// that gates and nonlinearities are exercised), then norm gains and biases away from 1 and 0.
inline void randomize(ParameterSet& params, Rng& rng, const std::function<void(Rng&)>& init) {
  init(rng);
  for (Parameter& p : params.params()) {
    if (p.role == ParamRole::vector) fill_uniform(p.value, rng, 0.5, 1.5);
  }
}

// Runs forward/backward of a module on x and checks ∂(Σ y ⊙ r)/∂x and ∂/∂θ for every parameter.
inline void check_module(ParameterSet& params, const SeqLayout& seqs, Tensor x, const Forward& forward,
                         const Backward& backward, int64_t param_entries = 12) {
  Arena activations, scratch;
  Rng rng(7);
  auto run_forward = [&]() {
    activations.reset();
    scratch.reset();
    StepContext ctx(activations, scratch, seqs, DType::f64);
    return forward(ctx, x);
  };
  const Tensor r = random_tensor(run_forward().shape(), rng);
  const auto loss = [&]() { return dot(run_forward(), r); };

  params.zero_grads();
  activations.reset();
  scratch.reset();
  StepContext ctx(activations, scratch, seqs, DType::f64);
  forward(ctx, x);
  Tensor dx = Tensor::zeros(x.shape(), DType::f64);
  backward(ctx, x, r, dx);
  EXPECT_TRUE(gradient_matches("input", loss, x, dx, 1e-5, 32));
  const Tensor grads = params.grads().clone();
  for (Parameter& p : params.params()) {
    const Tensor analytic = Tensor::view(grads.data<double>() + p.offset, p.shape, DType::f64);
    EXPECT_TRUE(gradient_matches(p.name, loss, p.value, analytic, 1e-5, param_entries));
  }
}

// check_module on a random input of `width` features over packed_layout(), drawn from rng.
inline void check_packed(ParameterSet& params, Rng& rng, int64_t width, const Forward& forward,
                         const Backward& backward) {
  const SeqLayout seqs = packed_layout();
  check_module(params, seqs, random_tensor({seqs.num_tokens(), width}, rng), forward, backward);
}

// The same for a module with forward(ctx, x) and backward(ctx, x, dy, dx) (a mixer, the MLP).
template <class Module>
void check_packed(ParameterSet& params, Rng& rng, int64_t width, Module& module) {
  check_packed(
      params, rng, width, [&](StepContext& ctx, const Tensor& x) { return module.forward(ctx, x); },
      [&](StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) { module.backward(ctx, x, dy, dx); });
}

}  // namespace linea::testing

// Random problems for the gated-linear-attention family (model/mixers/gla/gla.h), one per named mixer
// (model/mixers/gla/presets.h), drawn as fla's tests draw theirs (reference/mixers.md §3.4):
// q, k, v ~ N(0, 1); g = logsigmoid(N(0, 1)) / normalizer per channel (gla, hgrn2, rwkv6) or per
// head (mamba2); RetNet's fixed per-head decays; u ~ N(0, 1) for rwkv6; optional h0 ~ N(0, 1);
// random upstream gradients d_o, dht for the loss L = Σ o ⊙ d_o + Σ ht ⊙ dht. Problems are made in
// f64 and can be cast to f32.
#pragma once
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernels/random.h"
#include "model/mixers/gla/gla.h"
#include "model/mixers/gla/presets.h"
#include "tests/testing/assert_close.h"
#include "tests/testing/finite_difference.h"
#include "tests/testing/mixers/random_problem.h"

namespace linea::testing {

using GlaShape = MixerProblemShape;

struct GlaProblem {
  ops::GlaSpec spec;
  SeqLayout seqs;
  ops::GlaInputs in;
  Tensor d_o, dht;
};

namespace gla_detail {
inline Tensor normal(Shape shape, Rng& rng) {
  Tensor t = Tensor::empty(std::move(shape), DType::f64);
  fill_normal(t, rng, 0, 1);
  return t;
}
// logsigmoid(N(0, 1)) / normalizer
inline Tensor log_decays(Shape shape, Rng& rng, double normalizer) {
  Tensor t = normal(std::move(shape), rng);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double& x = t.data<double>()[i];
    x = -std::log1p(std::exp(-x)) / normalizer;
  }
  return t;
}
}  // namespace gla_detail

inline GlaProblem make_gla_problem(ops::GlaMixer mixer, const GlaShape& shape, double normalizer, uint64_t seed) {
  using namespace gla_detail;
  Rng rng(seed);
  GlaProblem p;
  p.seqs.cu_seqlens = shape.cu_seqlens;
  const int64_t N = p.seqs.num_tokens(), H = shape.heads, K = shape.key_dim, V = shape.value_dim;
  const int64_t S = p.seqs.num_seqs();
  p.spec = ops::gla_mixer_spec(mixer, K);
  p.in.q = normal({N, H, K}, rng);
  if (p.spec.key == ops::GlaKey::given) p.in.k = normal({N, H, K}, rng);
  p.in.v = normal({N, H, V}, rng);
  switch (p.spec.decay) {
    case ops::GlaDecay::channel: p.in.g = log_decays({N, H, K}, rng, normalizer); break;
    case ops::GlaDecay::scalar: p.in.g = log_decays({N, H}, rng, normalizer); break;
    case ops::GlaDecay::head: p.in.g = ops::retnet_log_decays(H, 0, DType::f64); break;
  }
  if (p.spec.readout == ops::GlaReadout::before_write_bonus) p.in.u = normal({H, K}, rng);
  if (shape.with_h0) p.in.h0 = normal({S, H, K, V}, rng);
  p.d_o = normal({N, H, V}, rng);
  p.dht = normal({S, H, K, V}, rng);
  return p;
}

inline GlaProblem cast_problem(const GlaProblem& p, DType dtype) {
  GlaProblem c = p;
  for (Tensor* t : {&c.in.q, &c.in.k, &c.in.v, &c.in.g, &c.in.u, &c.in.h0, &c.d_o, &c.dht}) {
    *t = cast_defined(*t, dtype);
  }
  return c;
}

// Forward outputs and every gradient of one run, in the problem's dtype.
struct GlaResult {
  Tensor o, ht;
  ops::GlaGrads grads;

  // (name, tensor) for every defined output and gradient.
  std::vector<std::pair<std::string, Tensor>> named() const {
    return defined_named({{"o", &o},
                          {"ht", &ht},
                          {"dq", &grads.dq},
                          {"dk", &grads.dk},
                          {"dv", &grads.dv},
                          {"dg", &grads.dg},
                          {"du", &grads.du},
                          {"dh0", &grads.dh0}});
  }
};

inline GlaResult run_forward(ops::GlaImpl impl, const GlaProblem& p) {
  GlaResult r;
  r.o = zeros_like(p.d_o);
  r.ht = zeros_like(p.dht);
  ops::gla_forward(impl, p.spec, p.seqs, p.in, r.o, r.ht);
  return r;
}

inline GlaResult run_forward_backward(ops::GlaImpl impl, const GlaProblem& p) {
  GlaResult r = run_forward(impl, p);
  const Tensor dg = p.spec.decay == ops::GlaDecay::head ? Tensor() : zeros_like(p.in.g);
  r.grads = {zeros_like(p.in.q), zeros_like(p.in.k), zeros_like(p.in.v), dg, zeros_like(p.in.u), zeros_like(p.dht)};
  ops::gla_backward(impl, p.spec, p.seqs, p.in, p.d_o, p.dht, r.grads);
  return r;
}

// L = Σ o ⊙ d_o + Σ ht ⊙ dht (f64 problems).
inline double gla_loss(ops::GlaImpl impl, const GlaProblem& p) {
  const GlaResult r = run_forward(impl, p);
  return dot(r.o, p.d_o) + (p.dht.defined() ? dot(r.ht, p.dht) : 0.0);
}

}  // namespace linea::testing

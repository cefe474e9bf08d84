// Random delta-rule problems for the tests, drawn as fla's tests draw them (reference/mixers.md
// §3.4): q, k L2-normalised per head (N(0,1) for DeltaNet, U[0,1) otherwise), v ~ N(0,1),
// β, b, w = σ(U[0,1)), g = logsigmoid(U[0,1)) / normalizer (per channel for channel decay),
// scale 1/sqrt(K), optional h0 ~ N(0,1), and random upstream gradients d_o, dht for the loss
// L = Σ o ⊙ d_o + Σ ht ⊙ dht; with_write_error adds the write error r and Σ r ⊙ dr. Problems are made in f64 and can be
// cast to f32.
#pragma once
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernels/random.h"
#include "model/mixers/delta_rule/delta_rule.h"
#include "model/mixers/delta_rule/delta_rule_config.h"
#include "tests/testing/assert_close.h"
#include "tests/testing/finite_difference.h"
#include "tests/testing/mixers/random_problem.h"

namespace linea::testing {

using DeltaRuleShape = MixerProblemShape;

struct DeltaRuleProblem {
  ops::DeltaRuleSpec spec;
  SeqLayout seqs;
  ops::DeltaRuleInputs in;
  Tensor d_o, dht;
  Tensor dr;  // upstream gradient of the write error r; undefined: r is not asked for
};

// The named mixers of the family (its presets: deltanet, gdn, kda, gdn2) and their kinds.
inline const std::vector<DeltaRulePreset>& named_mixers() { return delta_rule_presets(); }

inline std::string kind_name(ops::DecayKind decay, ops::GateKind gate) {
  for (const DeltaRulePreset& m : named_mixers()) {
    if (m.decay == decay && m.gate == gate) return m.name;
  }
  const char* d = decay == ops::DecayKind::none ? "none" : decay == ops::DecayKind::scalar ? "scalar" : "channel";
  return std::string("decay_") + d + (gate == ops::GateKind::beta ? "_beta" : "_erase_write");
}

namespace delta_rule_detail {
inline double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
inline double log_sigmoid(double x) { return -std::log1p(std::exp(-x)); }

inline Tensor map_uniform(Shape shape, Rng& rng, double (*f)(double), double divide = 1) {
  Tensor t = Tensor::empty(std::move(shape), DType::f64);
  fill_uniform(t, rng, 0, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = f(t.data<double>()[i]) / divide;
  return t;
}

// x / sqrt(Σ x² + 1e-6) over the last dimension.
inline void l2_normalise_rows(Tensor t) {
  const int64_t D = t.dim(-1);
  double* x = t.data<double>();
  for (int64_t r = 0; r < t.numel() / D; ++r) {
    double ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += x[r * D + d] * x[r * D + d];
    const double rstd = 1 / std::sqrt(ss + 1e-6);
    for (int64_t d = 0; d < D; ++d) x[r * D + d] *= rstd;
  }
}
}  // namespace delta_rule_detail

inline DeltaRuleProblem make_delta_rule_problem(ops::DecayKind decay, ops::GateKind gate, const DeltaRuleShape& shape,
                                                double normalizer, uint64_t seed) {
  using namespace delta_rule_detail;
  Rng rng(seed);
  DeltaRuleProblem p;
  p.seqs.cu_seqlens = shape.cu_seqlens;
  const int64_t N = p.seqs.num_tokens(), H = shape.heads, K = shape.key_dim, V = shape.value_dim;
  p.spec = {decay, gate, 1 / std::sqrt(static_cast<double>(K))};
  const bool deltanet = decay == ops::DecayKind::none && gate == ops::GateKind::beta;
  for (Tensor* t : {&p.in.q, &p.in.k}) {
    *t = Tensor::empty({N, H, K}, DType::f64);
    deltanet ? fill_normal(*t, rng, 0, 1) : fill_uniform(*t, rng, 0, 1);
    l2_normalise_rows(*t);
  }
  p.in.v = Tensor::empty({N, H, V}, DType::f64);
  fill_normal(p.in.v, rng, 0, 1);
  if (gate == ops::GateKind::beta) {
    p.in.beta = map_uniform({N, H}, rng, sigmoid);
  } else {
    p.in.b = map_uniform({N, H, K}, rng, sigmoid);
    p.in.w = map_uniform({N, H, V}, rng, sigmoid);
  }
  if (decay == ops::DecayKind::scalar) p.in.g = map_uniform({N, H}, rng, log_sigmoid, normalizer);
  if (decay == ops::DecayKind::channel) p.in.g = map_uniform({N, H, K}, rng, log_sigmoid, normalizer);
  const int64_t S = p.seqs.num_seqs();
  if (shape.with_h0) {
    p.in.h0 = Tensor::empty({S, H, K, V}, DType::f64);
    fill_normal(p.in.h0, rng, 0, 1);
  }
  p.d_o = Tensor::empty({N, H, V}, DType::f64);
  fill_normal(p.d_o, rng, 0, 1);
  p.dht = Tensor::empty({S, H, K, V}, DType::f64);
  fill_normal(p.dht, rng, 0, 1);
  return p;
}

// The problem with the write error asked for: dr ~ N(0, 1).
inline DeltaRuleProblem with_write_error(DeltaRuleProblem p, uint64_t seed) {
  Rng rng(seed);
  p.dr = Tensor::empty(p.d_o.shape(), DType::f64);
  fill_normal(p.dr, rng, 0, 1);
  return p;
}

inline DeltaRuleProblem cast_problem(const DeltaRuleProblem& p, DType dtype) {
  DeltaRuleProblem c = p;
  for (Tensor* t :
       {&c.in.q, &c.in.k, &c.in.v, &c.in.beta, &c.in.b, &c.in.w, &c.in.g, &c.in.h0, &c.d_o, &c.dht, &c.dr}) {
    *t = cast_defined(*t, dtype);
  }
  return c;
}

// Forward outputs and every gradient of one run, in the problem's dtype.
struct DeltaRuleResult {
  Tensor o, ht, r;
  ops::DeltaRuleGrads grads;

  // (name, tensor) for every defined output and gradient.
  std::vector<std::pair<std::string, Tensor>> named() const {
    return defined_named({{"o", &o},
                          {"r", &r},
                          {"ht", &ht},
                          {"dq", &grads.dq},
                          {"dk", &grads.dk},
                          {"dv", &grads.dv},
                          {"dbeta", &grads.dbeta},
                          {"db", &grads.db},
                          {"dw", &grads.dw},
                          {"dg", &grads.dg},
                          {"dh0", &grads.dh0}});
  }
};

inline DeltaRuleResult run_forward(ops::DeltaRuleImpl impl, const DeltaRuleProblem& p) {
  DeltaRuleResult r;
  r.o = zeros_like(p.d_o);
  r.ht = zeros_like(p.dht);
  r.r = zeros_like(p.dr);
  ops::delta_rule_forward(impl, p.spec, p.seqs, p.in, r.o, r.ht, r.r);
  return r;
}

inline DeltaRuleResult run_forward_backward(ops::DeltaRuleImpl impl, const DeltaRuleProblem& p) {
  DeltaRuleResult r = run_forward(impl, p);
  r.grads = {zeros_like(p.in.q), zeros_like(p.in.k), zeros_like(p.in.v), zeros_like(p.in.beta),
             zeros_like(p.in.b), zeros_like(p.in.w), zeros_like(p.in.g), zeros_like(p.dht)};
  ops::delta_rule_backward(impl, p.spec, p.seqs, p.in, p.d_o, p.dht, r.grads, p.dr);
  return r;
}

// L = Σ o ⊙ d_o + Σ ht ⊙ dht (+ Σ r ⊙ dr) (f64 problems).
inline double delta_rule_loss(ops::DeltaRuleImpl impl, const DeltaRuleProblem& p) {
  const DeltaRuleResult r = run_forward(impl, p);
  return dot(r.o, p.d_o) + dot(r.ht, p.dht) + (p.dr.defined() ? dot(r.r, p.dr) : 0.0);
}

}  // namespace linea::testing

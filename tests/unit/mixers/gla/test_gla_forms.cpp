// The gated-linear-attention op against forms written independently of it, in f64, both
// implementations:
//   the unrolled sum of every mixer, o_t = scale · qᵀ [Π a · h0 + Σ_j (Π a) k_j v_jᵀ] (+ the bonus),
//   with the decay products taken factor by factor;
//   and the family's reductions, outputs and gradients:
//     mamba2 (scalar decay) is the per-channel op with g repeated over K, dg = Σ_d dg_d;
//     retnet (fixed per-head decay) is the scalar-decay op with g_t = g_h for every token;
//     hgrn2 (k tied to g) is gla with k = 1 − exp(g), and dg = dg_gla − exp(g) ⊙ dk_gla.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/testing/mixers/gla_problem.h"

namespace linea {
namespace {

using ops::GlaImpl;
using ops::GlaMixer;
using testing::GlaProblem;
using testing::GlaResult;

constexpr double kTolerance = 1e-12;
// Three sequences (20, 1 and 130 tokens: full and partial chunks), h0 ≠ 0, K ≠ V.
const testing::GlaShape kShape{{0, 20, 21, 151}, 2, 5, 7, true};

// o of `p` summed token by token from its definition: for head h and token t of a sequence that
// starts at b, the readout reads the state after token r = t (or r = t − 1 with the bonus):
//   S = (Π_{b≤s≤r} a_s) h0 + Σ_{b≤j≤r} (Π_{j<s≤r} a_s) k_j v_jᵀ,   o_t = scale · (Sᵀ q_t + bonus).
Tensor unrolled_output(const GlaProblem& p) {
  const int64_t H = p.in.q.dim(1), K = p.in.q.dim(2), V = p.in.v.dim(2);
  const bool bonus = p.spec.readout == ops::GlaReadout::before_write_bonus;
  const double *q = p.in.q.data<double>(), *v = p.in.v.data<double>(), *g = p.in.g.data<double>();
  const auto log_decay = [&](int64_t t, int64_t h, int64_t d) {
    switch (p.spec.decay) {
      case ops::GlaDecay::channel: return g[(t * H + h) * K + d];
      case ops::GlaDecay::scalar: return g[t * H + h];
      case ops::GlaDecay::head: return g[h];
    }
    return 0.0;
  };
  const auto key = [&](int64_t t, int64_t h, int64_t d) {
    return p.spec.key == ops::GlaKey::given ? p.in.k.data<double>()[(t * H + h) * K + d]
                                            : 1 - std::exp(log_decay(t, h, d));
  };
  Tensor o = Tensor::zeros({p.seqs.num_tokens(), H, V}, DType::f64);
  for (int64_t s = 0; s < p.seqs.num_seqs(); ++s) {
    const int64_t b = p.seqs.begin(s);
    for (int64_t t = b; t < p.seqs.end(s); ++t) {
      const int64_t r = bonus ? t - 1 : t;
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t e = 0; e < V; ++e) {
          double sum = 0;
          for (int64_t d = 0; d < K; ++d) {
            const double qd = q[(t * H + h) * K + d];
            if (p.in.h0.defined()) {
              double decay = 1;
              for (int64_t i = b; i <= r; ++i) decay *= std::exp(log_decay(i, h, d));
              sum += qd * decay * p.in.h0.data<double>()[((s * H + h) * K + d) * V + e];
            }
            for (int64_t j = b; j <= r; ++j) {
              double decay = 1;
              for (int64_t i = j + 1; i <= r; ++i) decay *= std::exp(log_decay(i, h, d));
              sum += qd * decay * key(j, h, d) * v[(j * H + h) * V + e];
            }
            if (bonus) sum += qd * p.in.u.data<double>()[h * K + d] * key(t, h, d) * v[(t * H + h) * V + e];
          }
          o.data<double>()[(t * H + h) * V + e] = p.spec.scale * sum;
        }
      }
    }
  }
  return o;
}

class GlaForms : public ::testing::TestWithParam<GlaImpl> {};

TEST_P(GlaForms, EveryMixerMatchesItsUnrolledSum) {
  for (GlaMixer mixer : ops::gla_mixers()) {
    const GlaProblem p = testing::make_gla_problem(mixer, kShape, 1.0, 41);
    const GlaResult r = testing::run_forward(GetParam(), p);
    EXPECT_TRUE(testing::assert_close("o", unrolled_output(p), r.o, kTolerance, 0)) << ops::gla_mixer_name(mixer);
  }
}

// [N, H] → [N, H, K], each value repeated over K channels; [H] → [N, H] likewise over N tokens.
Tensor repeat_last(const Tensor& t, int64_t times) {
  Shape shape = t.shape();
  shape.push_back(times);
  Tensor out = Tensor::empty(shape, DType::f64);
  for (int64_t i = 0; i < t.numel(); ++i) {
    for (int64_t c = 0; c < times; ++c) out.data<double>()[i * times + c] = t.data<double>()[i];
  }
  return out;
}
Tensor repeat_over_tokens(const Tensor& per_head, int64_t tokens) {
  const int64_t H = per_head.numel();
  Tensor out = Tensor::empty({tokens, H}, DType::f64);
  for (int64_t i = 0; i < tokens * H; ++i) out.data<double>()[i] = per_head.data<double>()[i % H];
  return out;
}

// [N, H, K] → [N, H], summed over channels.
Tensor sum_last(const Tensor& t) {
  const int64_t K = t.dim(-1);
  Tensor out = Tensor::zeros({t.dim(0), t.dim(1)}, DType::f64);
  for (int64_t i = 0; i < t.numel(); ++i) out.data<double>()[i / K] += t.data<double>()[i];
  return out;
}

void expect_outputs_equal(const GlaResult& ref, const GlaResult& got, bool with_dk = true) {
  EXPECT_TRUE(testing::assert_close("o", ref.o, got.o, kTolerance, 0));
  EXPECT_TRUE(testing::assert_close("ht", ref.ht, got.ht, kTolerance, 0));
  EXPECT_TRUE(testing::assert_close("dq", ref.grads.dq, got.grads.dq, kTolerance, 0));
  if (with_dk) {
    EXPECT_TRUE(testing::assert_close("dk", ref.grads.dk, got.grads.dk, kTolerance, 0));
  }
  EXPECT_TRUE(testing::assert_close("dv", ref.grads.dv, got.grads.dv, kTolerance, 0));
  EXPECT_TRUE(testing::assert_close("dh0", ref.grads.dh0, got.grads.dh0, kTolerance, 0));
}

TEST_P(GlaForms, ScalarDecayIsChannelDecayRepeated) {
  const GlaProblem mamba2 = testing::make_gla_problem(GlaMixer::mamba2, kShape, 1.0, 42);
  GlaProblem channel = mamba2;
  channel.spec.decay = ops::GlaDecay::channel;
  channel.in.g = repeat_last(mamba2.in.g, kShape.key_dim);
  const GlaResult ref = testing::run_forward_backward(GetParam(), channel);
  const GlaResult got = testing::run_forward_backward(GetParam(), mamba2);
  expect_outputs_equal(ref, got);
  EXPECT_TRUE(testing::assert_close("dg", sum_last(ref.grads.dg), got.grads.dg, kTolerance, 0));
}

TEST_P(GlaForms, FixedDecayIsScalarDecayRepeated) {
  const GlaProblem retnet = testing::make_gla_problem(GlaMixer::retnet, kShape, 1.0, 43);
  GlaProblem scalar = retnet;
  scalar.spec.decay = ops::GlaDecay::scalar;
  scalar.in.g = repeat_over_tokens(retnet.in.g, retnet.seqs.num_tokens());
  expect_outputs_equal(testing::run_forward_backward(GetParam(), scalar),
                       testing::run_forward_backward(GetParam(), retnet));
}

TEST_P(GlaForms, TiedKeyIsGlaWithOneMinusDecay) {
  const GlaProblem hgrn2 = testing::make_gla_problem(GlaMixer::hgrn2, kShape, 1.0, 44);
  GlaProblem gla = hgrn2;
  gla.spec.key = ops::GlaKey::given;
  gla.in.k = Tensor::empty(hgrn2.in.g.shape(), DType::f64);
  for (int64_t i = 0; i < gla.in.k.numel(); ++i) gla.in.k.data<double>()[i] = -std::expm1(hgrn2.in.g.data<double>()[i]);
  const GlaResult ref = testing::run_forward_backward(GetParam(), gla);
  const GlaResult got = testing::run_forward_backward(GetParam(), hgrn2);
  EXPECT_FALSE(got.grads.dk.defined());
  expect_outputs_equal(ref, got, false);
  Tensor dg = ref.grads.dg.clone();
  for (int64_t i = 0; i < dg.numel(); ++i) {
    dg.data<double>()[i] -= std::exp(hgrn2.in.g.data<double>()[i]) * ref.grads.dk.data<double>()[i];
  }
  EXPECT_TRUE(testing::assert_close("dg", dg, got.grads.dg, kTolerance, 0));
}

INSTANTIATE_TEST_SUITE_P(BothImpls, GlaForms, ::testing::Values(GlaImpl::recurrent, GlaImpl::chunked),
                         [](const auto& info) { return info.param == GlaImpl::recurrent ? "recurrent" : "chunked"; });

}  // namespace
}  // namespace linea

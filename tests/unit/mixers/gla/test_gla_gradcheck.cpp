// Hand-written backward passes of the gated-linear-attention family against central finite
// differences in f64, for every mixer preset, both implementations and every input, on small
// packed problems whose sequences cross the recurrent checkpoint segment and the chunk (64 tokens),
// plus sequences of one and zero tokens.
#include <gtest/gtest.h>

#include "tests/testing/mixers/gla_problem.h"

namespace linea {
namespace {

using ops::GlaImpl;
using ops::GlaMixer;
using testing::GlaProblem;

struct GradCase {
  GlaImpl impl;
  GlaMixer mixer;
};

std::string case_name(const ::testing::TestParamInfo<GradCase>& info) {
  return std::string(info.param.impl == GlaImpl::recurrent ? "recurrent_" : "chunked_") +
         std::string(ops::gla_mixer_name(info.param.mixer));
}

class GlaGradcheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(GlaGradcheck, EveryInputMatchesFiniteDifferences) {
  const GradCase c = GetParam();
  // Sequences of 1, 3, 0 and 70 tokens: 70 crosses the 64-token segment / chunk boundary; the empty
  // one passes h0 to ht (and dht to dh0).
  const testing::GlaShape shape{{0, 1, 4, 4, 74}, 2, 3, 4, true};
  GlaProblem p = testing::make_gla_problem(c.mixer, shape, 1.0, 11);
  const testing::GlaResult r = testing::run_forward_backward(c.impl, p);
  const auto loss = [&] { return testing::gla_loss(c.impl, p); };

  const std::pair<const char*, std::pair<Tensor, Tensor>> checks[] = {
      {"q", {p.in.q, r.grads.dq}}, {"k", {p.in.k, r.grads.dk}}, {"v", {p.in.v, r.grads.dv}},
      {"g", {p.in.g, r.grads.dg}}, {"u", {p.in.u, r.grads.du}}, {"h0", {p.in.h0, r.grads.dh0}}};
  int checked_inputs = 0;
  for (const auto& [name, pair] : checks) {
    const auto& [input, grad] = pair;
    const bool fixed_decay = std::string(name) == "g" && p.spec.decay == ops::GlaDecay::head;
    if (!input.defined() || fixed_decay) {
      EXPECT_FALSE(grad.defined()) << name;
      continue;
    }
    ASSERT_TRUE(grad.defined()) << name;
    testing::expect_gradient_matches(name, loss, input, grad);
    ++checked_inputs;
  }
  // q, v, h0; k unless tied to g; g unless fixed; u for the bonus readout.
  const int expected = 3 + (p.spec.key == ops::GlaKey::given) + (p.spec.decay != ops::GlaDecay::head) +
                       (p.spec.readout == ops::GlaReadout::before_write_bonus);
  EXPECT_EQ(checked_inputs, expected);
}

std::vector<GradCase> all_cases() {
  std::vector<GradCase> cases;
  for (GlaImpl impl : {GlaImpl::recurrent, GlaImpl::chunked}) {
    for (GlaMixer mixer : ops::gla_mixers()) cases.push_back({impl, mixer});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllMixers, GlaGradcheck, ::testing::ValuesIn(all_cases()), case_name);

// The loss has no ht term when dht is undefined, and h0 = undefined means a zero initial state.
TEST(GlaGradcheck, UndefinedH0AndDhtMeanZeros) {
  for (GlaImpl impl : {GlaImpl::recurrent, GlaImpl::chunked}) {
    for (GlaMixer mixer : ops::gla_mixers()) {
      const testing::GlaShape shape{{0, 5, 9}, 2, 3, 2, false};
      GlaProblem p = testing::make_gla_problem(mixer, shape, 1.0, 3);
      GlaProblem zero = p;
      zero.in.h0 = Tensor::zeros({2, 2, 3, 2}, DType::f64);
      zero.dht = Tensor::zeros({2, 2, 3, 2}, DType::f64);
      p.dht = Tensor();
      const testing::GlaResult with_undefined = testing::run_forward_backward(impl, p);
      const testing::GlaResult with_zeros = testing::run_forward_backward(impl, zero);
      EXPECT_FALSE(with_undefined.ht.defined());
      EXPECT_FALSE(with_undefined.grads.dh0.defined());
      const int compared = testing::expect_named_close(with_zeros.named(), with_undefined.named(), 1e-14,
                                                       std::string(ops::gla_mixer_name(mixer)));
      EXPECT_EQ(compared, static_cast<int>(with_undefined.named().size()));
    }
  }
}

}  // namespace
}  // namespace linea

// Hand-written delta-rule backward passes against central finite differences in f64, for every
// decay kind × gate kind and every input, on small packed problems whose sequences cross the
// recurrent checkpoint segment and the chunk (64 tokens), plus sequences of one and zero tokens.
#include <gtest/gtest.h>

#include "tests/testing/mixers/delta_rule_problem.h"

namespace linea {
namespace {

using ops::DecayKind;
using ops::DeltaRuleImpl;
using ops::GateKind;
using testing::DeltaRuleProblem;

struct GradCase {
  DeltaRuleImpl impl;
  DecayKind decay;
  GateKind gate;
};

std::string case_name(const ::testing::TestParamInfo<GradCase>& info) {
  return std::string(info.param.impl == DeltaRuleImpl::recurrent ? "recurrent_" : "chunked_") +
         testing::kind_name(info.param.decay, info.param.gate);
}

class DeltaRuleGradcheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(DeltaRuleGradcheck, EveryInputMatchesFiniteDifferences) {
  const GradCase c = GetParam();
  // Sequences of 1, 3, 0 and 70 tokens: 70 crosses the 64-token segment / chunk boundary; the empty
  // one passes h0 to ht (and dht to dh0).
  const testing::DeltaRuleShape shape{{0, 1, 4, 4, 74}, 2, 3, 4, true};
  DeltaRuleProblem p = testing::make_delta_rule_problem(c.decay, c.gate, shape, 1.0, 11);
  const testing::DeltaRuleResult r = testing::run_forward_backward(c.impl, p);
  const auto loss = [&] { return testing::delta_rule_loss(c.impl, p); };

  const std::pair<const char*, std::pair<Tensor, Tensor>> checks[] = {
      {"q", {p.in.q, r.grads.dq}},          {"k", {p.in.k, r.grads.dk}},   {"v", {p.in.v, r.grads.dv}},
      {"beta", {p.in.beta, r.grads.dbeta}}, {"b", {p.in.b, r.grads.db}},   {"w", {p.in.w, r.grads.dw}},
      {"g", {p.in.g, r.grads.dg}},          {"h0", {p.in.h0, r.grads.dh0}}};
  int checked_inputs = 0;
  for (const auto& [name, pair] : checks) {
    const auto& [input, grad] = pair;
    if (!input.defined()) continue;
    ASSERT_TRUE(grad.defined()) << name;
    testing::expect_gradient_matches(name, loss, input, grad);
    ++checked_inputs;
  }
  const int gates = c.gate == GateKind::beta ? 1 : 2;
  const int decays = c.decay == DecayKind::none ? 0 : 1;
  EXPECT_EQ(checked_inputs, 4 + gates + decays);
}

std::vector<GradCase> all_cases() {
  std::vector<GradCase> cases;
  for (DeltaRuleImpl impl : {DeltaRuleImpl::recurrent, DeltaRuleImpl::chunked}) {
    for (DecayKind decay : {DecayKind::none, DecayKind::scalar, DecayKind::channel}) {
      for (GateKind gate : {GateKind::beta, GateKind::erase_write}) cases.push_back({impl, decay, gate});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllKinds, DeltaRuleGradcheck, ::testing::ValuesIn(all_cases()), case_name);

// The loss has no ht term when dht is undefined, and h0 = undefined means a zero initial state.
TEST(DeltaRuleGradcheck, UndefinedH0AndDhtMeanZeros) {
  for (DeltaRuleImpl impl : {DeltaRuleImpl::recurrent, DeltaRuleImpl::chunked}) {
    const testing::DeltaRuleShape shape{{0, 5, 9}, 1, 3, 2, false};
    DeltaRuleProblem p = testing::make_delta_rule_problem(DecayKind::channel, GateKind::beta, shape, 1.0, 3);
    DeltaRuleProblem zero = p;
    zero.in.h0 = Tensor::zeros({2, 1, 3, 2}, DType::f64);
    zero.dht = Tensor::zeros({2, 1, 3, 2}, DType::f64);
    p.dht = Tensor();
    const testing::DeltaRuleResult with_undefined = testing::run_forward_backward(impl, p);
    const testing::DeltaRuleResult with_zeros = testing::run_forward_backward(impl, zero);
    EXPECT_FALSE(with_undefined.ht.defined());
    testing::expect_named_close(with_zeros.named(), with_undefined.named(), 1e-14);
    EXPECT_EQ(with_undefined.named().size(), 6u);  // o, dq, dk, dv, dbeta, dg
  }
}

}  // namespace
}  // namespace linea

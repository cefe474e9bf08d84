// The delta rule's optional write error r = τ − S'ᵀρ (reference/mixers.md §5.1; the input of CLER
// and CLER-H routing), for every decay kind × gate kind:
//   - chunked equals the recurrent reference: r, o, ht and every gradient of a loss with a Σ r ⊙ dr
//     term (f64 to 1e-10; f32 within fla's tolerances, §3.3);
//   - both backward passes against central finite differences in f64;
//   - what r is: with b = w = β·1 the erase/write form's r (= its written vector u) is β times the
//     β form's r; and a sequence's first token without h0 has r = τ (v, or w ⊙ v);
//   - asking for r changes neither o nor any gradient when dr = 0.
#include <gtest/gtest.h>

#include "tests/testing/mixers/delta_rule_problem.h"

namespace linea {
namespace {

using ops::DecayKind;
using ops::DeltaRuleImpl;
using ops::GateKind;
using testing::DeltaRuleProblem;

struct Kind {
  DecayKind decay;
  GateKind gate;
};

std::vector<Kind> all_kinds() {
  std::vector<Kind> kinds;
  for (DecayKind decay : {DecayKind::none, DecayKind::scalar, DecayKind::channel}) {
    for (GateKind gate : {GateKind::beta, GateKind::erase_write}) kinds.push_back({decay, gate});
  }
  return kinds;
}

std::string kind_name(const ::testing::TestParamInfo<Kind>& info) {
  return testing::kind_name(info.param.decay, info.param.gate);
}

double f32_tolerance(const std::string& tensor) {
  if (tensor == "o" || tensor == "ht" || tensor == "r") return 0.005;
  if (tensor == "dbeta" || tensor == "dg") return 0.02;
  if (tensor == "db" || tensor == "dw") return 0.01;
  return 0.008;
}

class DeltaRuleWriteError : public ::testing::TestWithParam<Kind> {};

TEST_P(DeltaRuleWriteError, ChunkedMatchesRecurrent) {
  const Kind c = GetParam();
  // T = 75 and 130 (partial chunks), packed documents, K ≠ V, with and without h0.
  const testing::DeltaRuleShape shapes[] = {{{0, 75, 150}, 2, 60, 100, true}, {{0, 15, 100, 230}, 2, 32, 48, false}};
  for (const testing::DeltaRuleShape& shape : shapes) {
    const DeltaRuleProblem p64 =
        testing::with_write_error(testing::make_delta_rule_problem(c.decay, c.gate, shape, 1.0, 77), 78);
    const DeltaRuleProblem p32 = testing::cast_problem(p64, DType::f32);
    const auto ref64 = testing::run_forward_backward(DeltaRuleImpl::recurrent, p64).named();
    const auto got64 = testing::run_forward_backward(DeltaRuleImpl::chunked, p64).named();
    const auto ref32 = testing::run_forward_backward(DeltaRuleImpl::recurrent, p32).named();
    const auto got32 = testing::run_forward_backward(DeltaRuleImpl::chunked, p32).named();
    ASSERT_EQ(ref64.size(), got64.size());
    ASSERT_EQ(ref64[1].first, "r");
    for (size_t i = 0; i < ref64.size(); ++i) {
      const std::string& name = ref64[i].first;
      EXPECT_TRUE(testing::assert_close(name + " (f64)", ref64[i].second, got64[i].second, 1e-10, 0));
      EXPECT_TRUE(testing::assert_close(name + " (f32)", ref32[i].second, got32[i].second, f32_tolerance(name), 0));
    }
  }
}

TEST_P(DeltaRuleWriteError, BackwardMatchesFiniteDifferences) {
  const Kind c = GetParam();
  for (DeltaRuleImpl impl : {DeltaRuleImpl::recurrent, DeltaRuleImpl::chunked}) {
    // Sequences of 1, 3, 0 and 70 tokens (70 crosses the chunk and the recurrent segment).
    const testing::DeltaRuleShape shape{{0, 1, 4, 4, 74}, 2, 3, 4, true};
    DeltaRuleProblem p =
        testing::with_write_error(testing::make_delta_rule_problem(c.decay, c.gate, shape, 1.0, 21), 22);
    const testing::DeltaRuleResult r = testing::run_forward_backward(impl, p);
    const auto loss = [&] { return testing::delta_rule_loss(impl, p); };
    const std::pair<const char*, std::pair<Tensor, Tensor>> checks[] = {
        {"q", {p.in.q, r.grads.dq}},          {"k", {p.in.k, r.grads.dk}},   {"v", {p.in.v, r.grads.dv}},
        {"beta", {p.in.beta, r.grads.dbeta}}, {"b", {p.in.b, r.grads.db}},   {"w", {p.in.w, r.grads.dw}},
        {"g", {p.in.g, r.grads.dg}},          {"h0", {p.in.h0, r.grads.dh0}}};
    for (const auto& [name, pair] : checks) {
      const auto& [input, grad] = pair;
      if (!input.defined()) continue;
      testing::expect_gradient_matches(name, loss, input, grad);
    }
  }
}

TEST_P(DeltaRuleWriteError, ZeroUpstreamGradientChangesNothing) {
  const Kind c = GetParam();
  const testing::DeltaRuleShape shape{{0, 70, 90}, 2, 8, 6, true};
  const DeltaRuleProblem plain =
      testing::cast_problem(testing::make_delta_rule_problem(c.decay, c.gate, shape, 1.0, 5), DType::f32);
  DeltaRuleProblem routed = plain;
  routed.dr = Tensor::zeros(plain.d_o.shape(), DType::f32);
  for (DeltaRuleImpl impl : {DeltaRuleImpl::recurrent, DeltaRuleImpl::chunked}) {
    const auto a = testing::run_forward_backward(impl, plain).named();
    auto b = testing::run_forward_backward(impl, routed).named();
    b.erase(b.begin() + 1);  // r
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(testing::compare(a[i].second, b[i].second).abs_err, 0.0) << a[i].first;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllKinds, DeltaRuleWriteError, ::testing::ValuesIn(all_kinds()), kind_name);

// With b = w = β·1 the erase/write form is the β form, and its r (its written vector u) is β r.
TEST(DeltaRuleWriteErrorMeaning, EraseWriteFormIsBetaTimesTheBetaForm) {
  for (DecayKind decay : {DecayKind::none, DecayKind::scalar, DecayKind::channel}) {
    const testing::DeltaRuleShape shape{{0, 70, 100}, 2, 5, 3, true};
    const DeltaRuleProblem beta =
        testing::with_write_error(testing::make_delta_rule_problem(decay, GateKind::beta, shape, 1.0, 9), 10);
    DeltaRuleProblem ew = beta;
    const int64_t N = beta.seqs.num_tokens(), H = 2, K = 5, V = 3;
    ew.spec.gate = GateKind::erase_write;
    ew.in.beta = Tensor();
    ew.in.b = Tensor::empty({N, H, K}, DType::f64);
    ew.in.w = Tensor::empty({N, H, V}, DType::f64);
    Tensor expected = Tensor::empty({N, H, V}, DType::f64);
    for (DeltaRuleImpl impl : {DeltaRuleImpl::recurrent, DeltaRuleImpl::chunked}) {
      const Tensor r_beta = testing::run_forward(impl, beta).r;
      for (int64_t t = 0; t < N; ++t) {
        for (int64_t h = 0; h < H; ++h) {
          const double b = beta.in.beta.data<double>()[t * H + h];
          for (int64_t d = 0; d < K; ++d) ew.in.b.data<double>()[(t * H + h) * K + d] = b;
          for (int64_t e = 0; e < V; ++e) {
            ew.in.w.data<double>()[(t * H + h) * V + e] = b;
            expected.data<double>()[(t * H + h) * V + e] = b * r_beta.data<double>()[(t * H + h) * V + e];
          }
        }
      }
      EXPECT_LT(testing::compare(expected, testing::run_forward(impl, ew).r).abs_err, 1e-12);
    }
  }
}

// Without h0 the first token of a sequence is predicted from an empty state: r = τ.
TEST(DeltaRuleWriteErrorMeaning, FirstTokenOfASequenceIsItsTarget) {
  for (const Kind c : all_kinds()) {
    const testing::DeltaRuleShape shape{{0, 7, 80}, 1, 4, 3, false};
    const DeltaRuleProblem p =
        testing::with_write_error(testing::make_delta_rule_problem(c.decay, c.gate, shape, 1.0, 3), 4);
    for (DeltaRuleImpl impl : {DeltaRuleImpl::recurrent, DeltaRuleImpl::chunked}) {
      const Tensor r = testing::run_forward(impl, p).r;
      for (int64_t t : {int64_t(0), int64_t(7)}) {
        for (int64_t e = 0; e < 3; ++e) {
          const double v = p.in.v.data<double>()[t * 3 + e];
          const double target = c.gate == GateKind::beta ? v : p.in.w.data<double>()[t * 3 + e] * v;
          EXPECT_NEAR(r.data<double>()[t * 3 + e], target, 1e-14) << testing::kind_name(c.decay, c.gate);
        }
      }
    }
  }
}

}  // namespace
}  // namespace linea

// The family's reductions (reference/mixers.md §1.4), outputs and gradients, for both
// implementations in f64:
//   GDN with g = 0 is DeltaNet;
//   GDN-2 with b = β·1, w = β·1 is KDA, and then dβ = Σ_d db_d + Σ_e dw_e;
//   KDA with g_t,d = g_t for every channel is GDN, and then dg_t(GDN) = Σ_d dg_t,d(KDA).
#include <gtest/gtest.h>

#include "tests/testing/mixers/delta_rule_problem.h"

namespace linea {
namespace {

using ops::DecayKind;
using ops::DeltaRuleImpl;
using ops::GateKind;
using testing::DeltaRuleProblem;
using testing::DeltaRuleResult;

constexpr double kTolerance = 1e-12;
// Two sequences (20 and 130 tokens: full and partial chunks), h0 ≠ 0, K ≠ V.
const testing::DeltaRuleShape kShape{{0, 20, 150}, 2, 16, 24, true};

// [N, H] → [N, H, C], each value repeated over C channels.
Tensor repeat_channels(const Tensor& t, int64_t channels) {
  Tensor out = Tensor::empty({t.dim(0), t.dim(1), channels}, DType::f64);
  for (int64_t i = 0; i < t.numel(); ++i) {
    for (int64_t c = 0; c < channels; ++c) out.data<double>()[i * channels + c] = t.data<double>()[i];
  }
  return out;
}

// [N, H, C] → [N, H], summed over channels.
Tensor sum_channels(const Tensor& t) {
  Tensor out = Tensor::zeros({t.dim(0), t.dim(1)}, DType::f64);
  const int64_t channels = t.dim(2);
  for (int64_t i = 0; i < t.numel(); ++i) out.data<double>()[i / channels] += t.data<double>()[i];
  return out;
}

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = a.clone();
  for (int64_t i = 0; i < a.numel(); ++i) out.data<double>()[i] += b.data<double>()[i];
  return out;
}

// o, ht, dq, dk, dv and dh0, which every reduction keeps unchanged.
void expect_shared_tensors_equal(const DeltaRuleResult& ref, const DeltaRuleResult& got) {
  EXPECT_TRUE(testing::assert_close("o", ref.o, got.o, kTolerance, 0));
  EXPECT_TRUE(testing::assert_close("ht", ref.ht, got.ht, kTolerance, 0));
  EXPECT_TRUE(testing::assert_close("dq", ref.grads.dq, got.grads.dq, kTolerance, 0));
  EXPECT_TRUE(testing::assert_close("dk", ref.grads.dk, got.grads.dk, kTolerance, 0));
  EXPECT_TRUE(testing::assert_close("dv", ref.grads.dv, got.grads.dv, kTolerance, 0));
  EXPECT_TRUE(testing::assert_close("dh0", ref.grads.dh0, got.grads.dh0, kTolerance, 0));
}

class DeltaRuleReductions : public ::testing::TestWithParam<DeltaRuleImpl> {};

TEST_P(DeltaRuleReductions, GdnWithZeroDecayIsDeltaNet) {
  const DeltaRuleProblem deltanet = testing::make_delta_rule_problem(DecayKind::none, GateKind::beta, kShape, 1, 21);
  DeltaRuleProblem gdn = deltanet;
  gdn.spec.decay = DecayKind::scalar;
  gdn.in.g = Tensor::zeros(deltanet.in.beta.shape(), DType::f64);

  const DeltaRuleResult ref = testing::run_forward_backward(GetParam(), deltanet);
  const DeltaRuleResult got = testing::run_forward_backward(GetParam(), gdn);
  expect_shared_tensors_equal(ref, got);
  EXPECT_TRUE(testing::assert_close("dbeta", ref.grads.dbeta, got.grads.dbeta, kTolerance, 0));
}

TEST_P(DeltaRuleReductions, Gdn2WithBetaGatesIsKda) {
  const DeltaRuleProblem kda = testing::make_delta_rule_problem(DecayKind::channel, GateKind::beta, kShape, 1, 22);
  DeltaRuleProblem gdn2 = kda;
  gdn2.spec.gate = GateKind::erase_write;
  gdn2.in.b = repeat_channels(kda.in.beta, kShape.key_dim);
  gdn2.in.w = repeat_channels(kda.in.beta, kShape.value_dim);
  gdn2.in.beta = Tensor();

  const DeltaRuleResult ref = testing::run_forward_backward(GetParam(), kda);
  const DeltaRuleResult got = testing::run_forward_backward(GetParam(), gdn2);
  expect_shared_tensors_equal(ref, got);
  EXPECT_TRUE(testing::assert_close("dg", ref.grads.dg, got.grads.dg, kTolerance, 0));
  const Tensor dbeta = add(sum_channels(got.grads.db), sum_channels(got.grads.dw));
  EXPECT_TRUE(testing::assert_close("dbeta = Σ db + Σ dw", ref.grads.dbeta, dbeta, kTolerance, 0));
}

TEST_P(DeltaRuleReductions, KdaWithUniformDecayIsGdn) {
  const DeltaRuleProblem gdn = testing::make_delta_rule_problem(DecayKind::scalar, GateKind::beta, kShape, 1, 23);
  DeltaRuleProblem kda = gdn;
  kda.spec.decay = DecayKind::channel;
  kda.in.g = repeat_channels(gdn.in.g, kShape.key_dim);

  const DeltaRuleResult ref = testing::run_forward_backward(GetParam(), gdn);
  const DeltaRuleResult got = testing::run_forward_backward(GetParam(), kda);
  expect_shared_tensors_equal(ref, got);
  EXPECT_TRUE(testing::assert_close("dbeta", ref.grads.dbeta, got.grads.dbeta, kTolerance, 0));
  EXPECT_TRUE(testing::assert_close("dg = Σ_d dg_d", ref.grads.dg, sum_channels(got.grads.dg), kTolerance, 0));
}

INSTANTIATE_TEST_SUITE_P(BothImpls, DeltaRuleReductions,
                         ::testing::Values(DeltaRuleImpl::recurrent, DeltaRuleImpl::chunked),
                         [](const ::testing::TestParamInfo<DeltaRuleImpl>& info) {
                           return info.param == DeltaRuleImpl::recurrent ? "recurrent" : "chunked";
                         });

}  // namespace
}  // namespace linea

// Each model layer's hand-written backward against central finite differences in f64: the input
// gradient and every parameter tensor (a sample of entries of each), with loss = Σ y ⊙ r for a
// fixed random r, on packed sequences (one longer than a 64-token chunk).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "kernels/arena.h"
#include "model/embedding.h"
#include "model/linear.h"
#include "model/low_rank_linear.h"
#include "model/mixers/attention/attention_layer.h"
#include "model/mixers/delta_rule/delta_rule_layer.h"
#include "model/rms_norm.h"
#include "model/short_conv.h"
#include "model/swiglu_mlp.h"
#include "tests/testing/kernel_test.h"
#include "tests/testing/module_check.h"

namespace linea {
namespace {

using testing::check_module;
using testing::check_packed;
using testing::dot;
using testing::gradient_matches;
using testing::packed_layout;
using testing::random_tensor;
using testing::randomize;

TEST(ModelLayers, Linear) {
  ParameterSet params(DType::f64);
  Linear linear(params, "proj", 6, 5, /*bias=*/true);
  params.finalize();
  Rng rng(1);
  randomize(params, rng, [&](Rng& r) { linear.init(r, 0.5); });
  check_packed(
      params, rng, 6, [&](StepContext& ctx, const Tensor& x) { return linear.forward(ctx, x); },
      [&](StepContext&, const Tensor& x, const Tensor& dy, Tensor dx) { linear.backward(x, dy, dx, false); });
}

TEST(ModelLayers, LinearAccumulatesIntoSharedInputGradient) {
  ParameterSet params(DType::f64);
  Linear a(params, "a", 3, 2, false), b(params, "b", 3, 4, false);
  params.finalize();
  Rng rng(2);
  a.init(rng, 1.0);
  b.init(rng, 1.0);
  Arena activations, scratch;
  const SeqLayout seqs = SeqLayout::uniform(1, 4);
  StepContext ctx(activations, scratch, seqs, DType::f64);
  const Tensor x = random_tensor({4, 3}, rng);
  a.forward(ctx, x);
  b.forward(ctx, x);
  const Tensor da = random_tensor({4, 2}, rng), db = random_tensor({4, 4}, rng);
  Tensor both = Tensor::zeros({4, 3}, DType::f64), only_b = Tensor::zeros({4, 3}, DType::f64);
  a.backward(x, da, both, false);
  b.backward(x, db, both, true);
  Tensor only_a = Tensor::zeros({4, 3}, DType::f64);
  a.backward(x, da, only_a, false);
  b.backward(x, db, only_b, false);
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_NEAR(both.data<double>()[i], only_a.data<double>()[i] + only_b.data<double>()[i], 1e-12);
  }
}

TEST(ModelLayers, LowRankLinear) {
  ParameterSet params(DType::f64);
  LowRankLinear proj(params, "g_proj", 6, 2, 7, /*bias=*/true);
  params.finalize();
  Rng rng(3);
  randomize(params, rng, [&](Rng& r) { proj.init(r, 0.5); });
  check_packed(
      params, rng, 6, [&](StepContext& ctx, const Tensor& x) { return proj.forward(ctx, x); },
      [&](StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) { proj.backward(ctx, x, dy, dx, false); });
  EXPECT_NE(params.find("g_proj.0.weight"), nullptr);
  EXPECT_NE(params.find("g_proj.1.bias"), nullptr);
}

TEST(ModelLayers, RMSNorm) {
  ParameterSet params(DType::f64);
  RMSNorm norm(params, "norm", 6, 1e-6);
  params.finalize();
  Rng rng(4);
  randomize(params, rng, [&](Rng&) { norm.init(); });
  check_packed(
      params, rng, 6, [&](StepContext& ctx, const Tensor& x) { return norm.forward(ctx, x); },
      [&](StepContext&, const Tensor& x, const Tensor& dy, Tensor dx) { norm.backward(x, dy, dx); });
}

TEST(ModelLayers, SwiGLUMLP) {
  ParameterSet params(DType::f64);
  SwiGLUMLP mlp(params, "mlp", 6, 10);
  params.finalize();
  Rng rng(5);
  randomize(params, rng, [&](Rng& r) { mlp.init(r, 0.5); });
  check_packed(params, rng, 6, mlp);
}

TEST(ModelLayers, ShortConvRestartsAtDocumentBoundaries) {
  ParameterSet params(DType::f64);
  ShortConv conv(params, "conv", 5, 4);
  params.finalize();
  Rng rng(6);
  randomize(params, rng, [&](Rng& r) { conv.init(r, 0.5); });
  const SeqLayout seqs = packed_layout();
  const Tensor x = random_tensor({seqs.num_tokens(), 5}, rng);
  check_module(
      params, seqs, x, [&](StepContext& ctx, const Tensor& in) { return conv.forward(ctx, in); },
      [&](StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) { conv.backward(ctx, x, dy, dx); });

  // The second document's output does not change when the first document's tokens do.
  Arena activations, scratch;
  StepContext ctx(activations, scratch, seqs, DType::f64);
  const Tensor before = conv.forward(ctx, x).clone();
  Tensor changed = x.clone();
  for (int64_t i = 0; i < 5 * 5; ++i) changed.data<double>()[i] += 1.0;
  const Tensor after = conv.forward(ctx, changed);
  for (int64_t i = 5 * 5; i < x.numel(); ++i) EXPECT_EQ(before.data<double>()[i], after.data<double>()[i]);
}

TEST(ModelLayers, EmbeddingAndBadIds) {
  ParameterSet params(DType::f64);
  Embedding embedding(params, "embedding", 7, 3);
  params.finalize();
  Rng rng(8);
  embedding.init(rng, 1.0);
  const SeqLayout seqs = SeqLayout::uniform(1, 5);
  const Tensor ids = testing::index_tensor({3, 1, 3, 6, 0});
  Arena activations, scratch;
  const Tensor r = random_tensor({5, 3}, rng);
  const auto loss = [&]() {
    activations.reset();
    StepContext ctx(activations, scratch, seqs, DType::f64);
    return dot(embedding.forward(ctx, ids), r);
  };
  params.zero_grads();
  loss();
  embedding.backward(r);
  const Tensor analytic = embedding.table().grad.clone();
  EXPECT_TRUE(gradient_matches("embedding.weight", loss, embedding.table().value, analytic, 1e-6, 21));

  StepContext ctx(activations, scratch, seqs, DType::f64);
  EXPECT_TRUE(testing::throws_invalid_argument(
      [&] {
        embedding.forward(ctx, testing::index_tensor({1, 2, 7, 0, 0}));
      },
      {"embedding_forward", "ids", "entry 2 is 7", "[0, 7)"}));
}

// ---- mixers ------------------------------------------------------------------------------------

AttentionConfig attention_config(int64_t window) {
  AttentionConfig a;
  a.heads = 4;
  a.kv_heads = 2;
  a.head_dim = 4;
  a.window = window;
  a.rope_theta = 100.0;
  return a;
}

void check_attention(int64_t window) {
  ParameterSet params(DType::f64);
  AttentionLayer layer(params, "attn", 6, attention_config(window));
  params.finalize();
  Rng rng(9);
  randomize(params, rng, [&](Rng& r) { layer.init(r, 0.5); });
  check_packed(params, rng, 6, layer);
}

TEST(ModelLayers, AttentionGQA) { check_attention(0); }
TEST(ModelLayers, AttentionSlidingWindow) { check_attention(3); }

DeltaRuleConfig linear_config(const std::string& mixer, bool gate, bool neg_eigval, int64_t conv) {
  DeltaRuleConfig l(mixer);
  l.heads = 2;
  l.d_k = 4;
  l.d_v = 3;  // d_v ≠ d_k catches key/value width mix-ups
  l.conv = conv;
  l.output_gate = gate;
  l.allow_neg_eigval = neg_eigval;
  l.decay_rank = 2;
  l.gate_rank = 5;
  return l;
}

void check_delta_rule(const DeltaRuleConfig& config, const std::vector<std::string>& expected) {
  ParameterSet params(DType::f64);
  DeltaRuleLayer layer(params, "mixer", 6, config, 1e-6);
  params.finalize();
  for (const std::string& name : expected) EXPECT_NE(params.find("mixer." + name), nullptr) << name;
  Rng rng(10);
  randomize(params, rng, [&](Rng& r) { layer.init(r, 0.5); });
  check_packed(params, rng, 6, layer);
}

TEST(ModelLayers, DeltaNetPlainNorm) {
  check_delta_rule(linear_config("deltanet", false, false, 4),
                   {"q_proj.weight", "q_conv1d.weight", "b_proj.weight", "o_norm.weight", "o_proj.weight"});
}
TEST(ModelLayers, DeltaNetGatedNoConvNegativeEigenvalues) {
  check_delta_rule(linear_config("deltanet", true, true, 0), {"g_proj.weight"});
}
TEST(ModelLayers, GatedDeltaNet) {
  check_delta_rule(linear_config("gdn", true, false, 4),
                   {"a_proj.weight", "b_proj.weight", "A_log", "dt_bias", "g_proj.weight", "v_conv1d.weight"});
}
TEST(ModelLayers, KimiDeltaAttention) {
  check_delta_rule(linear_config("kda", true, false, 4), {"f_proj.0.weight", "f_proj.1.weight", "g_proj.0.weight",
                                                          "g_proj.1.weight", "g_proj.1.bias", "A_log", "dt_bias"});
}
TEST(ModelLayers, GatedDeltaNet2) {
  check_delta_rule(linear_config("gdn2", true, true, 3),
                   {"b_proj.weight", "w_proj.weight", "f_proj.0.weight", "g_proj.1.bias", "A_log", "dt_bias"});
}
TEST(ModelLayers, GatedDeltaNet2WithoutOutputGate) {
  check_delta_rule(linear_config("gdn2", false, false, 2), {"o_norm.weight"});
}

TEST(ModelLayers, DeltaRuleParameterShapesAndRoles) {
  ParameterSet params(DType::f32);
  DeltaRuleLayer kda(params, "kda", 6, linear_config("kda", true, false, 4), 1e-6);
  DeltaRuleLayer gdn(params, "gdn", 6, linear_config("gdn", true, false, 4), 1e-6);
  DeltaRuleLayer gdn2(params, "gdn2", 6, linear_config("gdn2", true, false, 4), 1e-6);
  struct Expect {
    std::string name;
    Shape shape;
    ParamRole role;
    bool decay;
  };
  const std::vector<Expect> expected = {
      {"kda.A_log", {2}, ParamRole::gate, false},
      {"kda.dt_bias", {8}, ParamRole::gate, false},  // per channel: H·d_k
      {"kda.b_proj.weight", {2, 6}, ParamRole::gate, true},
      {"kda.f_proj.1.weight", {8, 2}, ParamRole::matrix, true},
      {"kda.g_proj.1.weight", {6, 5}, ParamRole::matrix, true},
      {"kda.g_proj.1.bias", {6}, ParamRole::vector, false},
      {"kda.o_norm.weight", {3}, ParamRole::vector, false},
      {"kda.q_conv1d.weight", {8, 4}, ParamRole::conv, true},
      {"kda.v_conv1d.weight", {6, 4}, ParamRole::conv, true},
      {"gdn.A_log", {2}, ParamRole::gate, false},
      {"gdn.dt_bias", {2}, ParamRole::gate, false},
      {"gdn.a_proj.weight", {2, 6}, ParamRole::gate, true},
      {"gdn.g_proj.weight", {6, 6}, ParamRole::matrix, true},
      {"gdn.o_proj.weight", {6, 6}, ParamRole::matrix, true},
      {"gdn2.b_proj.weight", {8, 6}, ParamRole::matrix, true},
      {"gdn2.w_proj.weight", {6, 6}, ParamRole::matrix, true},
  };
  for (const Expect& e : expected) {
    const Parameter* p = params.find(e.name);
    ASSERT_NE(p, nullptr) << e.name;
    EXPECT_EQ(p->shape, e.shape) << e.name;
    EXPECT_EQ(p->role, e.role) << e.name;
    EXPECT_EQ(p->weight_decay, e.decay) << e.name;
  }
}

TEST(ModelLayers, GateInitialisation) {
  ParameterSet params(DType::f64);
  DeltaRuleLayer gdn(params, "gdn", 6, linear_config("gdn", true, false, 4), 1e-6);
  DeltaRuleLayer kda(params, "kda", 6, linear_config("kda", true, false, 4), 1e-6);
  params.finalize();
  Rng rng(11);
  gdn.init(rng, 0.02);
  kda.init(rng, 0.02);
  for (const char* name : {"gdn.A_log", "kda.A_log"}) {
    const Parameter* p = params.find(name);
    for (int64_t i = 0; i < p->value.numel(); ++i) {
      const double a = std::exp(p->value.data<double>()[i]);
      EXPECT_GT(a, name[0] == 'k' ? 1.0 : 0.0);
      EXPECT_LT(a, 16.0);
    }
  }
  for (const char* name : {"gdn.dt_bias", "kda.dt_bias"}) {
    const Parameter* p = params.find(name);
    for (int64_t i = 0; i < p->value.numel(); ++i) {
      const double dt = std::log1p(std::exp(p->value.data<double>()[i]));  // softplus(dt_bias) = dt
      EXPECT_GE(dt, 1e-3 * (1 - 1e-9));
      EXPECT_LE(dt, 1e-1 * (1 + 1e-9));
    }
  }
  const Parameter* norm = params.find("kda.o_norm.weight");
  for (int64_t i = 0; i < norm->value.numel(); ++i) EXPECT_EQ(norm->value.data<double>()[i], 1.0);
  const Parameter* bias = params.find("kda.g_proj.1.bias");
  for (int64_t i = 0; i < bias->value.numel(); ++i) EXPECT_EQ(bias->value.data<double>()[i], 0.0);
}

}  // namespace
}  // namespace linea

// The whole Model: forward/backward against finite differences in f64 for tiny hybrids (two
// delta-rule layers and one attention layer) of every linear mixer on packed documents; the loss
// at init; documents in one packed batch do not see each other; gradients accumulate over
// micro-batches; evaluate() matches forward_backward() and leaves gradients alone; f32 agrees with
// f64; bad token ids and targets are rejected.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "model/model.h"
#include "tests/testing/kernel_test.h"
#include "tests/testing/model_inputs.h"

namespace linea {
namespace {

using testing::index_tensor;
using testing::throws_invalid_argument;

// ∂loss/∂param against central differences on a few entries. eps = 1e-6: L2-normalising a 4-wide
// q or k makes the loss strongly curved where that vector is short, and the truncation error of
// the difference quotient grows as eps². Each entry must agree to 1e-5 relative, or to 1e-8
// absolute for gradients so small that rounding in the loss (≈ 1e-16 · loss / eps) dominates.
::testing::AssertionResult matches_finite_differences(const std::string& name, const std::function<double()>& loss,
                                                      Tensor value, const Tensor& analytic) {
  const testing::GradCheck r = testing::gradcheck(loss, value, analytic, 3, 1e-6);
  if (r.max_rel_err < 1e-5 || r.max_abs_err < 1e-8) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << name << ": max rel err " << r.max_rel_err << ", max abs err "
                                       << r.max_abs_err;
}

// Two linear layers around one softmax layer (attention at layer 1).
ModelConfig tiny_hybrid(const std::string& mixer, bool tied) {
  return testing::tiny_hybrid_config(mixer, tied, testing::kFiniteDifferenceSizes);
}

using Batch = testing::PackedBatch;

// Three packed documents of 4, 7 and 5 tokens.
Batch packed_batch(int64_t vocab, uint64_t seed) { return testing::packed_batch({4, 7, 5}, vocab, seed); }

void check_model_gradients(const ModelConfig& config) {
  Model model(config, DType::f64);
  model.init_parameters(3);
  Rng rng(4);
  for (Parameter& p : model.params().params()) {
    if (p.role == ParamRole::vector) fill_uniform(p.value, rng, 0.5, 1.5);
  }
  const Batch batch = packed_batch(11, 5);
  model.params().zero_grads();
  const double loss = model.forward_backward(batch.ids, batch.targets, batch.seqs, 1.0);
  EXPECT_TRUE(std::isfinite(loss));
  const Tensor grads = model.params().grads().clone();
  const auto eval = [&] { return model.evaluate(batch.ids, batch.targets, batch.seqs); };
  EXPECT_DOUBLE_EQ(eval(), loss);
  for (Parameter& p : model.params().params()) {
    const Tensor analytic = Tensor::view(grads.data<double>() + p.offset, p.shape, DType::f64);
    EXPECT_TRUE(matches_finite_differences(p.name, eval, p.value, analytic));
  }
}

void check_model_gradients(const std::string& mixer, bool tied) { check_model_gradients(tiny_hybrid(mixer, tied)); }

TEST(Model, GradientsDeltaNetHybrid) { check_model_gradients("deltanet", false); }
TEST(Model, GradientsGatedDeltaNetHybrid) { check_model_gradients("gdn", true); }
TEST(Model, GradientsKDAHybrid) { check_model_gradients("kda", false); }
TEST(Model, GradientsGatedDeltaNet2Hybrid) { check_model_gradients("gdn2", true); }

// model.layer_mixers: a hybrid of two delta-rule mixers (each with its own config) and attention,
// and blocks without an MLP.
TEST(Model, GradientsPerLayerMixersWithoutMlp) {
  ModelConfig c = tiny_hybrid("gdn", false);
  c.layer_mixers_terms = {"kda", "attention", "gdn"};
  c.mlp = false;
  DeltaRuleConfig& kda = c.mixer_config<DeltaRuleConfig>("kda");
  kda.heads = 1, kda.d_k = 4, kda.d_v = 5, kda.conv = 2, kda.decay_rank = 3, kda.gate_rank = 2;
  check_model_gradients(c);
  const Model model(c, DType::f64, /*allocate=*/false);
  EXPECT_NE(model.params().find("layers.0.mixer.f_proj.0.weight"), nullptr);  // kda
  EXPECT_NE(model.params().find("layers.2.mixer.a_proj.weight"), nullptr);    // gdn
  EXPECT_NE(model.params().find("layers.1.mixer.q_proj.weight"), nullptr);    // attention
  for (const Parameter& p : model.params().params()) EXPECT_EQ(p.name.find(".mlp"), std::string::npos) << p.name;
}

TEST(Model, LossAtInitIsLogVocab) {
  for (const DeltaRulePreset& preset : delta_rule_presets()) {
    const std::string mixer = preset.name;
    ModelConfig c = tiny_hybrid(mixer, false);
    c.d_model = 32;
    c.vocab = 512;
    c.init_std = 0.02;
    c.mlp_hidden = 0;
    DeltaRuleConfig& l = c.mixer_config<DeltaRuleConfig>(mixer);
    l.d_k = 16;
    l.d_v = 16;
    l.decay_rank = l.gate_rank = 0;
    c.mixer_config<AttentionConfig>("attention").head_dim = 16;
    Model model(c, DType::f32);
    model.init_parameters(1);
    // 2 × 256 random tokens: the sample mean of the loss is within ≈ 0.01 of its expectation,
    // log V + Var(logit)/2 = log V + (0.02² · d)/2 ≈ log V + 0.006.
    const SeqLayout seqs = SeqLayout::uniform(2, 256);
    Rng rng(2);
    std::vector<int32_t> ids(512), targets(512);
    for (auto& id : ids) id = static_cast<int32_t>(rng.next_u64() % 512);
    for (auto& t : targets) t = static_cast<int32_t>(rng.next_u64() % 512);
    const double loss = model.forward_backward(index_tensor(ids), index_tensor(targets), seqs, 1.0);
    EXPECT_NEAR(loss, std::log(512.0), 0.03) << mixer;
  }
}

TEST(Model, PackedDocumentsAreIndependent) {
  // The loss of a packed batch is the token-weighted mean of each document's loss on its own: no
  // conv, attention or recurrent state crosses a boundary (and RoPE positions restart).
  for (const DeltaRulePreset& preset : delta_rule_presets()) {
    const std::string mixer = preset.name;
    Model model(tiny_hybrid(mixer, false), DType::f64);
    model.init_parameters(6);
    const Batch batch = packed_batch(11, 7);
    double weighted = 0;
    int64_t targets = 0;
    for (int64_t s = 0; s < batch.seqs.num_seqs(); ++s) {
      const int64_t b = batch.seqs.begin(s), e = batch.seqs.end(s);
      const SeqLayout one = SeqLayout::uniform(1, e - b);
      const double loss = model.evaluate(batch.ids.slice(b, e), batch.targets.slice(b, e), one);
      weighted += loss * double(e - b - 1);
      targets += e - b - 1;
    }
    EXPECT_NEAR(model.evaluate(batch.ids, batch.targets, batch.seqs), weighted / double(targets), 1e-12) << mixer;
  }
}

TEST(Model, GradientsAccumulateAndEvaluateLeavesThemAlone) {
  Model model(tiny_hybrid("kda", false), DType::f64);
  model.init_parameters(8);
  const Batch batch = packed_batch(11, 9);
  model.params().zero_grads();
  model.forward_backward(batch.ids, batch.targets, batch.seqs, 1.0);
  const Tensor once = model.params().grads().clone();
  model.params().zero_grads();
  model.forward_backward(batch.ids, batch.targets, batch.seqs, 0.25);
  model.evaluate(batch.ids, batch.targets, batch.seqs);
  model.forward_backward(batch.ids, batch.targets, batch.seqs, 0.75);
  const Tensor twice = model.params().grads();
  for (int64_t i = 0; i < once.numel(); ++i) {
    ASSERT_NEAR(twice.data<double>()[i], once.data<double>()[i], 1e-12 * (1 + std::abs(once.data<double>()[i])));
  }
}

// Every parameter is reported once, later blocks first, and its gradient is final when reported.
TEST(Model, GradientsReadyReportsEachParameterOnceWhenFinal) {
  for (bool tied : {false, true}) {
    Model model(tiny_hybrid("gdn", tied), DType::f64);
    model.init_parameters(4);
    const Batch batch = packed_batch(11, 5);
    const auto& ps = model.params().params();
    struct Report {
      size_t first, end;
      Tensor grads;  // the reported parameters' gradients at the time of the report
    };
    std::vector<Report> reports;
    model.set_gradients_ready([&](size_t first, size_t end) {
      const int64_t begin = ps[first].offset, stop = end < ps.size() ? ps[end].offset : model.params().numel();
      reports.push_back({first, end, model.params().grads().slice(begin, stop).clone()});
    });
    model.params().zero_grads();
    model.forward_backward(batch.ids, batch.targets, batch.seqs, 1.0);
    std::vector<int> seen(ps.size(), 0);
    for (size_t r = 0; r < reports.size(); ++r) {
      const Report& report = reports[r];
      ASSERT_LE(report.end, ps.size());
      if (r + 1 < reports.size()) {
        EXPECT_GE(report.first, reports[r + 1].end) << "not in backward order";
      }
      for (size_t i = report.first; i < report.end; ++i) ++seen[i];
      const Tensor now =
          model.params().grads().slice(ps[report.first].offset, ps[report.first].offset + report.grads.numel());
      EXPECT_EQ(std::memcmp(now.raw(), report.grads.raw(), now.nbytes()), 0)
          << "parameters [" << report.first << ", " << report.end << ") changed after being reported";
    }
    for (size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(seen[i], 1) << ps[i].name << " tied " << tied;
    EXPECT_GE(reports.size(), 4u);  // head (untied) or nothing, three blocks, the rest
  }
}

// What forward keeps for backward, listed module by module as the headers state it (every other
// tensor of a step is a temporary in the scratch arena), as per-token widths in the step's dtype.
// Each is one arena allocation, rounded up to 256 bytes.
size_t kept_bytes(const ModelConfig& c, int64_t tokens, size_t element_bytes) {
  const auto arena_bytes = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  const int64_t D = c.d_model, F = c.mlp_hidden;
  std::vector<int64_t> widths = {D};  // the embedding's output
  for (int64_t layer = 0; layer < c.layers; ++layer) {
    if (c.layer_mixers[size_t(layer)] == "attention") {
      const auto& a = dynamic_cast<const AttentionConfig&>(c.layer_config(layer));
      const int64_t q = a.heads * a.head_dim, kv = a.kv_heads * a.head_dim;
      widths.insert(widths.end(), {q, kv, kv, q, a.heads});  // q, k, v (rotated), out, lse
    } else {
      const auto& l = dynamic_cast<const DeltaRuleConfig&>(c.layer_config(layer));
      const int64_t H = l.heads, HK = H * l.d_k, HV = H * l.d_v;
      const bool channel = l.preset.decay == ops::DecayKind::channel;        // low-rank decay and gate
      const bool erase_write = l.preset.gate == ops::GateKind::erase_write;  // GDN-2
      widths.insert(widths.end(), {HK, HK, HV});                             // q, k, v projections
      if (erase_write) widths.insert(widths.end(), {HK, HV});                // erase and write gates
      if (!erase_write) widths.push_back(H);                                 // β
      if (l.preset.decay == ops::DecayKind::scalar) widths.push_back(H);     // W_a x
      if (channel) widths.insert(widths.end(), {l.decay_rank, HK});          // W_f x and its inner
      widths.push_back(HV);                                                  // o
      if (l.output_gate && channel) widths.push_back(l.gate_rank);           // g_proj's inner
      if (l.output_gate) widths.push_back(HV);                               // z
    }
    widths.insert(widths.end(), {D, F, F, D});  // mixer output (h), MLP gate and up, block output
  }
  widths.insert(widths.end(), {D, D, D});  // the loss's dhidden and backward's two gradient buffers
  size_t total = arena_bytes(size_t(tokens) * sizeof(int32_t));  // RoPE positions
  for (const int64_t w : widths) total += arena_bytes(size_t(tokens * w) * element_bytes);
  return total;
}

// The activations arena holds no more than that list: norm outputs, conv and SiLU outputs, the
// L2-normed q and k, the decay gate, the normed output that feeds o_proj and the SwiGLU product are
// recomputed in backward, not kept.
TEST(Model, KeepsOnlyWhatBackwardNeeds) {
  for (const DeltaRulePreset& preset : delta_rule_presets()) {
    const std::string mixer = preset.name;
    for (bool gate : {false, true}) {
      ModelConfig c = tiny_hybrid(mixer, false);
      c.mixer_config<DeltaRuleConfig>(mixer).output_gate = gate;
      Model model(c, DType::f64);
      model.init_parameters(2);
      const Batch batch = packed_batch(11, 3);
      model.forward_backward(batch.ids, batch.targets, batch.seqs, 1.0);
      EXPECT_LE(model.saved_activation_bytes(), kept_bytes(model.config(), batch.seqs.num_tokens(), sizeof(double)))
          << mixer << " output_gate " << gate;
    }
  }
}

TEST(Model, Float32AgreesWithFloat64) {
  const ModelConfig c = tiny_hybrid("gdn2", false);
  Model f32(c, DType::f32), f64(c, DType::f64);
  f32.init_parameters(10);
  f64.init_parameters(10);
  const Batch batch = packed_batch(11, 11);
  f32.params().zero_grads();
  f64.params().zero_grads();
  const double l32 = f32.forward_backward(batch.ids, batch.targets, batch.seqs, 1.0);
  const double l64 = f64.forward_backward(batch.ids, batch.targets, batch.seqs, 1.0);
  EXPECT_NEAR(l32, l64, 1e-4 * l64);
  EXPECT_TRUE(testing::assert_close("grads", f64.params().grads(), testing::to_f64(f32.params().grads()), 1e-4));
}

TEST(Model, RejectsBadInput) {
  Model model(tiny_hybrid("gdn", false), DType::f64);
  model.init_parameters(12);
  const SeqLayout seqs = SeqLayout::uniform(1, 3);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        model.evaluate(index_tensor({1, 11, 2}), index_tensor({1, 2, 3}), seqs);
      },
      {"token id 11", "position 1"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        model.evaluate(index_tensor({1, 2, 3}), index_tensor({1, -2, 3}), seqs);
      },
      {"target -2", "position 1"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        model.evaluate(index_tensor({1, 2}), index_tensor({1, 2}), seqs);
      },
      {"ids must be i32 [3]"}));
  // No target at all: nothing to learn, nothing added.
  model.params().zero_grads();
  EXPECT_EQ(model.forward_backward(index_tensor({1, 2, 3}), index_tensor({-1, -1, -1}), seqs, 1.0), 0.0);
  const Tensor g = model.params().grads();
  for (int64_t i = 0; i < g.numel(); ++i) ASSERT_EQ(g.data<double>()[i], 0.0);
  // A config that cannot be built names its key.
  ModelConfig bad = tiny_hybrid("gdn", false);
  bad.mixer_config<AttentionConfig>("attention").kv_heads = 3;
  EXPECT_TRUE(throws_invalid_argument([&] { Model m(bad, DType::f64); }, {"model.attention.kv_heads"}));
}

}  // namespace
}  // namespace linea

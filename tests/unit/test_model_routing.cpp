// Cross-layer routing (model.routing: CLER, CLER-H, CLVR; reference/mixers.md §5.2) in the Model:
//   - [model.routing] is read and validated, errors naming the key; routing skips softmax layers;
//   - step 0 is the baseline exactly: a routed model's loss and every baseline parameter's gradient
//     equal the unrouted model's bit for bit at initialisation (f64 and f32), for every
//     delta-rule mixer and kind;
//   - the whole routed model's backward against finite differences in f64, with the routing
//     parameters moved away from their (zero) start so that every routed path carries gradient;
//   - the new parameters' names, shapes and optimizer roles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "data/config_reader.h"
#include "model/model.h"
#include "model/routing.h"
#include "tests/testing/assert_close.h"
#include "tests/testing/finite_difference.h"
#include "tests/testing/kernel_test.h"
#include "tests/testing/model_inputs.h"

namespace linea {
namespace {

using testing::parse_model;
using testing::throws_invalid_argument;

// Linear, attention, linear, linear: CLER's first link crosses the softmax layer (0 → 2).
ModelConfig tiny(const std::string& mixer, RoutingKind kind) {
  testing::TinyHybridSizes sizes = testing::kFiniteDifferenceSizes;
  sizes.layers = 4;
  ModelConfig c = testing::tiny_hybrid_config(mixer, false, sizes);
  c.routing.kind = kind;
  return c;
}

const std::vector<std::string>& mixers() {
  static const std::vector<std::string> m = {"deltanet", "gdn", "kda", "gdn2"};
  return m;
}

const std::string kHybrid = R"(
[model]
d_model = 32
layers = 8
vocab = 50
mixer = "gdn"
hybrid = "3:1"
)";

TEST(ModelRoutingConfig, ReadsKindsAndSkipsSoftmaxLayers) {
  const ModelConfig none = parse_model(kHybrid);
  EXPECT_FALSE(none.routing.enabled());
  // Attention at 3 and 7: CLER links 0→1, 1→2, 2→4 (over the softmax layer), 4→5, 5→6.
  const ModelConfig cler = parse_model(kHybrid + "[model.routing]\nkind = \"cler\"\n");
  EXPECT_EQ(cler.routing.kind, RoutingKind::cler);
  EXPECT_EQ(cler.routing.sends_to, (std::vector<int64_t>{1, 2, 4, -1, 5, 6, -1, -1}));
  EXPECT_EQ(cler.routing.receives_from, (std::vector<int64_t>{-1, 0, 1, -1, 2, 4, 5, -1}));
  const ModelConfig clvr = parse_model(kHybrid + "[model.routing]\nkind = \"clvr\"\nlayers = [0, 4]\n");
  EXPECT_EQ(clvr.routing.sends_to, (std::vector<int64_t>{0, -1, -1, -1, 4, -1, -1, -1}));
  const ModelConfig cler_h = parse_model(kHybrid + "[model.routing]\nkind = \"cler_h\"\n");
  EXPECT_EQ(cler_h.routing.sends_to, (std::vector<int64_t>{0, 1, 2, -1, 4, 5, 6, -1}));
  const ModelConfig opts = parse_model(kHybrid +
                                       "[model.routing]\nkind = \"cler\"\nstop_grad = true\nprojection = \"linear\"\n"
                                       "resume_unrouted = true\n");
  EXPECT_TRUE(opts.routing.stop_grad);
  EXPECT_EQ(opts.routing.projection, "linear");
  EXPECT_TRUE(opts.routing.resume_unrouted);
}

TEST(ModelRoutingConfig, BadKeysAreNamed) {
  const auto bad = [](const std::string& routing, const std::vector<std::string>& fragments) {
    return throws_invalid_argument([&] { parse_model(kHybrid + "[model.routing]\n" + routing); }, fragments);
  };
  EXPECT_TRUE(bad("kind = \"clr\"\n", {"test.toml", "model.routing.kind", "cler_h"}));
  EXPECT_TRUE(bad("kind = \"clvr\"\nlayers = [3]\n", {"model.routing.layers", "layer 3", "not a delta-rule layer"}));
  EXPECT_TRUE(bad("kind = \"clvr\"\nlayers = [8]\n", {"model.routing.layers", "outside [0, 8)"}));
  EXPECT_TRUE(bad("kind = \"clvr\"\nlayers = [1, 1]\n", {"model.routing.layers", "twice"}));
  EXPECT_TRUE(bad("kind = \"cler\"\nlayers = [6]\n", {"model.routing.layers", "no later delta-rule layer"}));
  EXPECT_TRUE(bad("kind = \"clvr\"\nstop_grad = true\n", {"model.routing.stop_grad", "cler"}));
  EXPECT_TRUE(bad("kind = \"cler_h\"\nprojection = \"linear\"\n", {"model.routing.projection"}));
  EXPECT_TRUE(bad("kind = \"cler\"\nprojection = \"dense\"\n", {"model.routing.projection", "auto"}));
  EXPECT_TRUE(bad("layers = [0]\n", {"model.routing.layers", "kind = \"none\""}));
  EXPECT_TRUE(bad("kind = \"cler\"\nstopgrad = true\n", {"model.routing.stopgrad"}));
  // A model of softmax attention alone has nothing to route.
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        parse_model(
            "[model]\nd_model = 8\nlayers = 2\nvocab = 10\nmixer = \"attention\"\n[model.routing]\nkind = \"clvr\"\n");
      },
      {"model.routing.kind", "no delta-rule layer"}));
}

TEST(ModelRouting, ParametersAndRoles) {
  const Model cler(tiny("gdn", RoutingKind::cler), DType::f32, false);
  const Parameter* lambda = cler.params().find("layers.2.mixer.cler_lambda");
  ASSERT_NE(lambda, nullptr);
  EXPECT_EQ(lambda->full_shape, (Shape{6}));
  EXPECT_EQ(lambda->role, ParamRole::gate);  // AdamW (§5.2)
  EXPECT_NE(cler.params().find("layers.3.mixer.cler_lambda"), nullptr);
  EXPECT_EQ(cler.params().find("layers.0.mixer.cler_lambda"), nullptr);
  EXPECT_EQ(cler.params().find("layers.2.mixer.cler_proj.weight"), nullptr);  // same shapes: Π = identity

  const Model cler_h(tiny("kda", RoutingKind::cler_h), DType::f32, false);
  const Parameter* we = cler_h.params().find("layers.0.mixer.cler_h_proj.weight");
  ASSERT_NE(we, nullptr);
  EXPECT_EQ(we->full_shape, (Shape{8, 6}));
  EXPECT_EQ(we->role, ParamRole::matrix);  // Muon
  EXPECT_EQ(cler_h.params().find("layers.0.mixer.cler_h_norm.weight")->role, ParamRole::vector);

  const Model clvr(tiny("gdn2", RoutingKind::clvr), DType::f32, false);
  const Parameter* wv = clvr.params().find("layers.3.mixer.clvr_proj.weight");
  ASSERT_NE(wv, nullptr);
  EXPECT_EQ(wv->role, ParamRole::matrix);
  EXPECT_EQ(clvr.params().find("layers.1.mixer.clvr_proj.weight"), nullptr);  // attention

  ModelConfig projected = tiny("gdn", RoutingKind::cler);
  projected.routing.projection = "linear";
  const Model with_projection(projected, DType::f32, false);
  const Parameter* pi = with_projection.params().find("layers.2.mixer.cler_proj.weight");
  ASSERT_NE(pi, nullptr);
  EXPECT_EQ(pi->full_shape, (Shape{6, 6}));
  EXPECT_EQ(pi->role, ParamRole::matrix);
}

// Loss and gradients of one micro-batch; the gradients by parameter name.
struct Step {
  double loss = 0;
  std::vector<std::pair<std::string, Tensor>> grads;
};

Step step(const ModelConfig& config, DType dtype) {
  Model model(config, dtype);
  model.init_parameters(7);
  const testing::PackedBatch batch = testing::packed_batch({6, 70, 9}, config.vocab, 8);
  model.params().zero_grads();
  Step s;
  s.loss = model.forward_backward(batch.ids, batch.targets, batch.seqs);
  for (const Parameter& p : model.params().params()) s.grads.emplace_back(p.name, p.grad.clone());
  return s;
}

struct StepZeroCase {
  std::string mixer;
  RoutingKind kind;
  bool projection;
};

class RoutingStepZero : public ::testing::TestWithParam<StepZeroCase> {};

TEST_P(RoutingStepZero, EqualsTheBaselineExactly) {
  const StepZeroCase c = GetParam();
  for (DType dtype : {DType::f64, DType::f32}) {
    ModelConfig routed = tiny(c.mixer, c.kind);
    if (c.projection) routed.routing.projection = "linear";
    const Step base = step(tiny(c.mixer, RoutingKind::none), dtype);
    const Step got = step(routed, dtype);
    EXPECT_EQ(base.loss, got.loss) << dtype_name(dtype);
    size_t matched = 0, routing = 0;
    for (const auto& [name, grad] : got.grads) {
      if (is_routing_parameter(name)) {
        ++routing;
        continue;
      }
      const auto it =
          std::find_if(base.grads.begin(), base.grads.end(), [&](const auto& b) { return b.first == name; });
      ASSERT_NE(it, base.grads.end()) << name;
      ASSERT_EQ(grad.nbytes(), it->second.nbytes()) << name;
      EXPECT_EQ(std::memcmp(grad.raw(), it->second.raw(), grad.nbytes()), 0)
          << name << " (" << dtype_name(dtype) << ")";
      ++matched;
    }
    EXPECT_EQ(matched, base.grads.size());
    EXPECT_GT(routing, 0u);
  }
}

std::vector<StepZeroCase> step_zero_cases() {
  std::vector<StepZeroCase> cases;
  for (const std::string& mixer : mixers()) {
    for (RoutingKind kind : {RoutingKind::cler, RoutingKind::cler_h, RoutingKind::clvr}) {
      cases.push_back({mixer, kind, false});
    }
  }
  cases.push_back({"gdn", RoutingKind::cler, true});
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<StepZeroCase>& info) {
  return info.param.mixer + "_" + routing_kind_name(info.param.kind) + (info.param.projection ? "_projection" : "");
}

INSTANTIATE_TEST_SUITE_P(AllMixers, RoutingStepZero, ::testing::ValuesIn(step_zero_cases()), case_name);

// The routed model's backward against central differences in f64 (as unit/test_model.cpp), with the
// routing parameters drawn away from zero.
void check_routed_gradients(const ModelConfig& config) {
  Model model(config, DType::f64);
  model.init_parameters(3);
  Rng rng(4);
  for (Parameter& p : model.params().params()) {
    if (p.role == ParamRole::vector) fill_uniform(p.value, rng, 0.5, 1.5);
    if (is_routing_parameter(p.name)) fill_normal(p.value, rng, 0, 0.5);
  }
  const testing::PackedBatch batch = testing::packed_batch({4, 7, 5}, config.vocab, 5);
  model.params().zero_grads();
  const double loss = model.forward_backward(batch.ids, batch.targets, batch.seqs, 1.0);
  ASSERT_TRUE(std::isfinite(loss));
  const Tensor grads = model.params().grads().clone();
  const auto eval = [&] { return model.evaluate(batch.ids, batch.targets, batch.seqs); };
  EXPECT_DOUBLE_EQ(eval(), loss);
  int64_t routing_tensors = 0;
  for (Parameter& p : model.params().params()) {
    const Tensor analytic = Tensor::view(grads.data<double>() + p.offset, p.shape, DType::f64);
    if (is_routing_parameter(p.name)) {
      // Every routed path carries gradient (a link that is not connected would pass the check below).
      ++routing_tensors;
      double norm = 0;
      for (int64_t i = 0; i < analytic.numel(); ++i) norm += std::abs(analytic.data<double>()[i]);
      EXPECT_GT(norm, 0.0) << p.name;
    }
    const testing::GradCheck r = testing::gradcheck(eval, p.value, analytic, 3, 1e-6);
    EXPECT_TRUE(r.max_rel_err < 1e-5 || r.max_abs_err < 1e-8)
        << p.name << ": max rel err " << r.max_rel_err << ", max abs err " << r.max_abs_err;
  }
  EXPECT_GT(routing_tensors, 0);
}

class RoutingGradients : public ::testing::TestWithParam<StepZeroCase> {};

TEST_P(RoutingGradients, MatchFiniteDifferences) {
  const StepZeroCase c = GetParam();
  ModelConfig config = tiny(c.mixer, c.kind);
  if (c.projection) config.routing.projection = "linear";
  check_routed_gradients(config);
}

INSTANTIATE_TEST_SUITE_P(AllMixers, RoutingGradients, ::testing::ValuesIn(step_zero_cases()), case_name);

// CLER with stop_grad: the same forward and the same gradients down to the receiver (its λ too),
// but the sender's parameters lose the part that came back through r.
TEST(RoutingGradients, StopGradKeepsTheSenderOutOfTheLink) {
  ModelConfig config = tiny("gdn", RoutingKind::cler);
  config.routing.layers = {2};  // 2 → 3 only
  const auto run = [&](bool stop_grad) {
    ModelConfig c = config;
    c.routing.stop_grad = stop_grad;
    Model model(c, DType::f64);
    model.init_parameters(3);
    Rng rng(9);
    fill_normal(model.params().find("layers.3.mixer.cler_lambda")->value, rng, 0, 0.5);
    const testing::PackedBatch batch = testing::packed_batch({4, 7, 5}, config.vocab, 5);
    model.params().zero_grads();
    Step s;
    s.loss = model.forward_backward(batch.ids, batch.targets, batch.seqs);
    for (const Parameter& p : model.params().params()) s.grads.emplace_back(p.name, p.grad.clone());
    return s;
  };
  const Step full = run(false), stopped = run(true);
  EXPECT_EQ(full.loss, stopped.loss);
  for (size_t i = 0; i < full.grads.size(); ++i) {
    const std::string& name = full.grads[i].first;
    const double diff = testing::compare(full.grads[i].second, stopped.grads[i].second).abs_err;
    if (name.rfind("layers.3.", 0) == 0 || name.rfind("head", 0) == 0 || name.rfind("norm", 0) == 0) {
      EXPECT_EQ(diff, 0.0) << name;
    }
    if (name == "layers.2.mixer.v_proj.weight" || name == "layers.2.mixer.k_proj.weight") {
      EXPECT_GT(diff, 0.0) << name;
    }
  }
}

// CLER between delta-rule layers of different shapes (KDA with 1 head of d_v 5 into GDN's 2 × 3):
// Π is a linear map [6, 5]; step 0 is still the baseline exactly and the gradients are right.
TEST(RoutingGradients, ProjectionBetweenLayersOfDifferentShapes) {
  ModelConfig config = tiny("gdn", RoutingKind::cler);
  config.layer_mixers_terms = {"kda", "attention", "gdn", "gdn"};
  DeltaRuleConfig& kda = config.mixer_config<DeltaRuleConfig>("kda");
  kda.heads = 1, kda.d_k = 4, kda.d_v = 5, kda.conv = 2, kda.decay_rank = 3, kda.gate_rank = 2;
  const Model model(config, DType::f64, false);
  const Parameter* pi = model.params().find("layers.2.mixer.cler_proj.weight");
  ASSERT_NE(pi, nullptr);
  EXPECT_EQ(pi->full_shape, (Shape{6, 5}));
  EXPECT_EQ(model.params().find("layers.3.mixer.cler_proj.weight"), nullptr);  // gdn → gdn: identity
  ModelConfig unrouted = config;
  unrouted.routing = RoutingConfig{};
  EXPECT_EQ(step(config, DType::f64).loss, step(unrouted, DType::f64).loss);
  check_routed_gradients(config);
}

}  // namespace
}  // namespace linea

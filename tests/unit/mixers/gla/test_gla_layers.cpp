// The gated-linear-attention family's layers (GLA, RetNet, HGRN-2, Mamba-2, RWKV-6) and HGRN's:
// every hand-written backward against central finite differences in f64 (the input gradient and
// every parameter, on packed documents of 5, 4 and 70 tokens), with gates and small parameters
// drawn away from their zero init (GLA and RetNet also with their q, k, v short convs, conv = 4);
// the parameter names and shapes fla gives them; HGRN's lower bounds shared by the layers of a stack.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "model/mixer_registry.h"
#include "model/mixers/gla/gla_configs.h"
#include "model/mixers/hgrn/hgrn_config.h"
#include "tests/testing/module_check.h"

namespace linea {
namespace {

using testing::check_packed;
using testing::packed_layout;
using testing::random_tensor;
using testing::randomize;

constexpr int64_t kDModel = 8;

// A small config of `mixer` at kDModel (widths that differ: K ≠ V), resolved; GLA's and RetNet's
// short convs of kernel `conv`.
std::unique_ptr<MixerConfig> small_config(const std::string& mixer, int64_t conv = 0) {
  std::unique_ptr<MixerConfig> config = mixer_family(mixer).make_config(mixer, "model." + mixer);
  if (auto* c = dynamic_cast<GlaConfig*>(config.get())) c->widths = {2, 0.5, 1.5}, c->gate_rank = 3, c->conv = conv;
  if (auto* c = dynamic_cast<RetNetConfig*>(config.get())) c->widths = {2, 1.0, 0.75}, c->conv = conv;
  if (auto* c = dynamic_cast<Hgrn2Config*>(config.get())) c->expand_ratio = 3;  // heads 2, d_k 3, d_v 4
  if (auto* c = dynamic_cast<Mamba2Config*>(config.get())) c->head_dim = 4, c->state_size = 3;
  if (auto* c = dynamic_cast<Rwkv6Config*>(config.get()))
    c->widths = {2, 0.5, 0.75}, c->proj_rank = 3, c->decay_rank = 2;
  if (auto* c = dynamic_cast<HgrnConfig*>(config.get())) c->expand_ratio = 1;
  config->resolve(kDModel, ConfigFieldError{nullptr, config->section});
  return config;
}

// Layer 2 of a stack of 4 (so that HGRN's and HGRN-2's lower bounds apply).
void check_layer(const std::string& mixer, const std::vector<std::string>& expected, int64_t conv = 0) {
  SCOPED_TRACE(mixer + " conv " + std::to_string(conv));
  const std::unique_ptr<MixerConfig> config = small_config(mixer, conv);
  ParameterSet params(DType::f64);
  const std::unique_ptr<Mixer> layer =
      mixer_family(mixer).make_layer(params, "mixer", kDModel, 1e-6, *config, {}, LayerPlace{2, 4});
  params.finalize();
  for (const std::string& name : expected) EXPECT_NE(params.find(name), nullptr) << name;
  Rng rng(10);
  randomize(params, rng, [&](Rng& r) { layer->init(r, 0.5); });
  for (Parameter& p : params.params()) {  // the zero-initialised gate parameters (μ, u, Γ) too
    if (p.role == ParamRole::gate && p.name.find("A_log") == std::string::npos &&
        p.name.find("dt_bias") == std::string::npos) {
      fill_uniform(p.value, rng, -0.5, 0.5);
    }
  }
  check_packed(params, rng, kDModel, *layer);
}

TEST(GlaLayers, Gla) {
  check_layer("gla", {"mixer.q_proj.weight", "mixer.k_proj.weight", "mixer.v_proj.weight", "mixer.gk_proj.0.weight",
                      "mixer.gk_proj.1.weight", "mixer.gk_proj.1.bias", "mixer.g_proj.weight", "mixer.g_norm.weight",
                      "mixer.o_proj.weight"});
}

TEST(GlaLayers, GlaWithShortConvs) {
  check_layer("gla",
              {"mixer.q_proj.weight", "mixer.q_conv1d.weight", "mixer.k_conv1d.weight", "mixer.v_conv1d.weight",
               "mixer.gk_proj.1.bias", "mixer.o_proj.weight"},
              4);
}

TEST(GlaLayers, GlaWithoutOutputGate) {
  const std::unique_ptr<MixerConfig> config = small_config("gla");
  dynamic_cast<GlaConfig&>(*config).output_gate = false;
  ParameterSet params(DType::f64);
  const std::unique_ptr<Mixer> layer = mixer_family("gla").make_layer(params, "mixer", kDModel, 1e-6, *config, {}, {});
  params.finalize();
  EXPECT_EQ(params.find("mixer.g_proj.weight"), nullptr);
  Rng rng(11);
  randomize(params, rng, [&](Rng& r) { layer->init(r, 0.5); });
  check_packed(params, rng, kDModel, *layer);
}

TEST(GlaLayers, RetNet) {
  check_layer("retnet", {"mixer.q_proj.weight", "mixer.k_proj.weight", "mixer.v_proj.weight", "mixer.g_proj.weight",
                         "mixer.g_norm.weight", "mixer.o_proj.weight"});
}

TEST(GlaLayers, RetNetWithShortConvs) {
  check_layer("retnet",
              {"mixer.q_proj.weight", "mixer.q_conv1d.weight", "mixer.k_conv1d.weight", "mixer.v_conv1d.weight",
               "mixer.g_norm.weight", "mixer.o_proj.weight"},
              4);
}

TEST(GlaLayers, Hgrn2) {
  check_layer("hgrn2", {"mixer.q_proj.weight", "mixer.f_proj.weight", "mixer.i_proj.weight", "mixer.g_norm.weight",
                        "mixer.o_proj.weight", "hgrn2.lower_bounds"});
}

TEST(GlaLayers, Mamba2) {
  check_layer("mamba2", {"mixer.z_proj.weight", "mixer.x_proj.weight", "mixer.B_proj.weight", "mixer.C_proj.weight",
                         "mixer.dt_proj.weight", "mixer.x_conv1d.weight", "mixer.x_conv1d.bias", "mixer.B_conv1d.bias",
                         "mixer.A_log", "mixer.dt_bias", "mixer.D", "mixer.norm.weight", "mixer.out_proj.weight"});
}

TEST(GlaLayers, Rwkv6) {
  check_layer("rwkv6", {"mixer.x_mu", "mixer.x_lora.0.0.weight", "mixer.x_lora.4.1.weight", "mixer.x_lora.2.1.bias",
                        "mixer.r_proj.weight", "mixer.w_proj.0.weight", "mixer.w_proj.1.bias", "mixer.k_proj.weight",
                        "mixer.v_proj.weight", "mixer.g_proj.weight", "mixer.bonus", "mixer.g_norm.weight",
                        "mixer.g_norm.bias", "mixer.o_proj.weight"});
}

TEST(GlaLayers, Hgrn) {
  check_layer("hgrn", {"mixer.i_proj.weight", "mixer.f_proj.weight", "mixer.g_proj.weight", "mixer.g_norm.weight",
                       "mixer.o_proj.weight", "hgrn.lower_bounds"});
}

// The layers of a stack share one Γ; layer 0 takes no bound (as fla), so its output does not
// depend on Γ, while a deeper layer's does.
TEST(GlaLayers, LowerBoundsAreSharedAndSkipLayerZero) {
  for (const std::string mixer : {"hgrn", "hgrn2"}) {
    SCOPED_TRACE(mixer);
    const std::unique_ptr<MixerConfig> config = small_config(mixer);
    ParameterSet params(DType::f64);
    std::vector<std::unique_ptr<Mixer>> layers;
    for (int64_t i = 0; i < 3; ++i) {
      layers.push_back(mixer_family(mixer).make_layer(params, "layers." + std::to_string(i), kDModel, 1e-6, *config, {},
                                                      LayerPlace{i, 3}));
    }
    params.finalize();
    const Parameter* gamma = params.find(mixer + ".lower_bounds");
    ASSERT_NE(gamma, nullptr);
    int found = 0;
    for (const Parameter& p : params.params()) found += p.name == mixer + ".lower_bounds";
    EXPECT_EQ(found, 1);
    EXPECT_EQ(gamma->shape, (Shape{3, config->mixer == "hgrn" ? kDModel : 6}));
    Rng rng(3);
    for (auto& l : layers) l->init(rng, 0.5);
    const SeqLayout seqs = packed_layout();
    const Tensor x = random_tensor({seqs.num_tokens(), kDModel}, rng);
    const auto output = [&](int64_t layer) {
      Arena activations, scratch;
      StepContext ctx(activations, scratch, seqs, DType::f64);
      return layers[size_t(layer)]->forward(ctx, x).clone();
    };
    const Tensor first0 = output(0), first2 = output(2);
    fill_uniform(gamma->value, rng, -1, 1);
    EXPECT_TRUE(testing::assert_close("layer 0", first0, output(0), 0, 0));
    EXPECT_FALSE(testing::compare(first2, output(2)).err_ratio < 1e-6);
  }
}

}  // namespace
}  // namespace linea

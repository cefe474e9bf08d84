// The mixer registry: one list of names, each provided by one family, and every registered mixer
// buildable from its family's defaults into a layer that maps [N, D] to [N, D] and back.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/arena.h"
#include "model/mixer_registry.h"
#include "model/mixers/delta_rule/delta_rule_config.h"
#include "model/model_config.h"
#include "tests/testing/kernel_test.h"

namespace linea {
namespace {

TEST(MixerRegistry, OneListOfNames) {
  EXPECT_EQ(mixer_names(), (std::vector<std::string>{"deltanet", "gdn", "kda", "gdn2", "attention"}));
  EXPECT_EQ(mixer_family("kda").name(), "delta_rule");
  EXPECT_EQ(mixer_family("attention").name(), "attention");
  EXPECT_EQ(find_mixer_family("mamba"), nullptr);
  EXPECT_TRUE(testing::throws_invalid_argument([] { mixer_family("mamba"); },
                                               {"unknown mixer 'mamba'; expected one of deltanet, gdn"}));
  for (const MixerFamily* family : mixer_families()) {
    const auto& mixers = family->mixers();
    EXPECT_NE(std::find(mixers.begin(), mixers.end(), family->default_mixer()), mixers.end()) << family->name();
  }
}

TEST(MixerRegistry, EveryMixerBuildsFromItsDefaults) {
  const int64_t d_model = 64;
  const SeqLayout seqs = SeqLayout{{0, 5, 12}};
  for (const std::string& mixer : mixer_names()) {
    SCOPED_TRACE(mixer);
    const MixerFamily& family = mixer_family(mixer);
    std::unique_ptr<MixerConfig> config = family.make_config(mixer, "model.test");
    EXPECT_EQ(config->mixer, mixer);
    config->resolve(d_model, ConfigFieldError{nullptr, config->section});
    ParameterSet params(DType::f64);
    const std::unique_ptr<Mixer> layer = family.make_layer(params, "mixer", d_model, 1e-6, *config, {});
    params.finalize();
    EXPECT_GT(params.params().size(), 0u);
    for (const Parameter& p : params.params()) EXPECT_EQ(p.name.rfind("mixer.", 0), 0u) << p.name;
    Rng rng(1);
    layer->init(rng, 0.02);
    Arena activations, scratch;
    StepContext ctx(activations, scratch, seqs, DType::f64);
    const Tensor x = testing::random_tensor({seqs.num_tokens(), d_model}, rng);
    const Tensor y = layer->forward(ctx, x);
    EXPECT_EQ(y.shape(), x.shape());
    Tensor dx = Tensor::empty(x.shape(), DType::f64);
    layer->backward(ctx, x, testing::random_tensor(y.shape(), rng), dx);
    EXPECT_GE(family.wide_values_per_token(*config), 0.0);
    EXPECT_GE(family.cuda_workspace_bytes(*config, 1024), 0.0);
    EXPECT_GT(family.mixing_flops_per_token(*config, 1024), 0.0);
  }
}

TEST(MixerRegistry, ConfigsCopyDeeply) {
  ModelConfig a;
  a.mixer_config<DeltaRuleConfig>("gdn").heads = 2;
  ModelConfig b = a;
  b.mixer_config<DeltaRuleConfig>("gdn").heads = 8;
  EXPECT_EQ(a.mixer_config<DeltaRuleConfig>("gdn").heads, 2);
  EXPECT_EQ(b.mixer_config<DeltaRuleConfig>("gdn").heads, 8);
}

}  // namespace
}  // namespace linea

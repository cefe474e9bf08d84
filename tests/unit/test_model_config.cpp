// ConfigReader (typed getters, overrides, unknown keys, resolved config), ModelConfig validation
// (every error names the file and the dotted key), hybrid layouts, and the parameter counts of the
// configs in configs/models/ against formulas written out independently of the model code.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "data/config_reader.h"
#include "model/mixer_family.h"
#include "model/mixer_registry.h"
#include "model/mixers/attention/attention_config.h"
#include "model/mixers/delta_rule/delta_rule_config.h"
#include "model/mixers/gla/gla_configs.h"
#include "model/mixers/hgrn/hgrn_config.h"
#include "model/model_config.h"
#include "model/parameter_count.h"
#include "tests/testing/kernel_test.h"
#include "tests/testing/model_inputs.h"

namespace linea {
namespace {

using testing::parse_model;
using testing::throws_invalid_argument;

const std::string kSmall = R"(
[model]
d_model = 64
layers = 4
vocab = 100
mixer = "gdn"
hybrid = "3:1"

[model.linear]
heads = 2
d_k = 16
d_v = 32

[model.attention]
heads = 4
)";

// ---- ConfigReader ------------------------------------------------------------------------------

TEST(ConfigReader, TypedGettersDefaultsAndRanges) {
  ConfigReader reader = ConfigReader::from_string(R"(
[train]
steps = 100
lr = 3      # an integer literal is a valid float
name = "run"
flags = [1, 2, 3]
[train.inner]
on = true
)",
                                                  "run.toml");
  ConfigSection train = reader.section("train");
  EXPECT_EQ(train.integer("steps", 1, 1), 100);
  EXPECT_EQ(train.integer("warmup", 7), 7);
  EXPECT_DOUBLE_EQ(train.number("lr", 0.1), 3.0);
  EXPECT_EQ(train.string("name", ""), "run");
  EXPECT_EQ(train.integer_list("flags", {}), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(train.section("inner").boolean("on", false));
  EXPECT_TRUE(train.has("steps"));
  EXPECT_FALSE(train.has("warmup"));
  EXPECT_NO_THROW(reader.check_unknown_keys());
  // Defaults appear in the resolved configuration, next to the values read from the file.
  const std::string resolved = reader.resolved();
  EXPECT_NE(resolved.find("warmup = 7"), std::string::npos) << resolved;
  EXPECT_NE(resolved.find("steps = 100"), std::string::npos) << resolved;

  EXPECT_TRUE(throws_invalid_argument([&] { train.integer("steps", 1, 1, 50); },
                                      {"run.toml: train.steps: expected an integer in [1, 50], got 100"}));
  EXPECT_TRUE(throws_invalid_argument([&] { train.integer("name", 1); },
                                      {"run.toml: train.name: expected an integer, got a string"}));
  EXPECT_TRUE(throws_invalid_argument([&] { train.boolean("steps", false); },
                                      {"train.steps: expected a boolean", "got an integer"}));
  EXPECT_TRUE(throws_invalid_argument([&] { train.number("lr", 0, 0, 1); }, {"train.lr: expected a number in [0, 1]"}));
  EXPECT_TRUE(throws_invalid_argument([&] { train.required_integer("missing"); }, {"train.missing: missing"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        train.choice("name", "a", {"a", "b"});
      },
      {"train.name: expected one of a, b; got 'run'"}));
  EXPECT_TRUE(throws_invalid_argument([&] { train.integer_list("name", {}); }, {"expected an array of integers"}));
}

TEST(ConfigReader, UnknownKeysAreReportedWithSuggestions) {
  ConfigReader reader = ConfigReader::from_string("[model]\nd_modle = 3\n[other]\nx = 1\n", "m.toml");
  ConfigSection model = reader.section("model");
  model.integer("d_model", 1);
  EXPECT_TRUE(throws_invalid_argument([&] { reader.check_unknown_keys({"model"}); },
                                      {"m.toml: unknown key 'model.d_modle'", "did you mean 'model.d_model'?"}));
  // Restricted to [model], the unread [other] table is someone else's business; unrestricted, it is reported.
  EXPECT_TRUE(throws_invalid_argument([&] { reader.check_unknown_keys(); }, {"'other.x'"}));
}

TEST(ConfigReader, OverridesParseTomlLiteralsOrBareStrings) {
  ConfigReader reader = ConfigReader::from_string(
      "[model]\nlayers = 2\nhybrid = \"pure\"\n", "m.toml",
      {"model.layers=12", "model.hybrid=3:1", "model.norm_eps = 1e-5", "model.tie_embeddings=true",
       "model.linear.heads=4", "model.list=[1, 3]", "model.name=\"quoted\"", "model.word=gdn"});
  ConfigSection model = reader.section("model");
  EXPECT_EQ(model.integer("layers", 0), 12);
  EXPECT_EQ(model.string("hybrid", ""), "3:1");
  EXPECT_DOUBLE_EQ(model.number("norm_eps", 0), 1e-5);
  EXPECT_TRUE(model.boolean("tie_embeddings", false));
  EXPECT_EQ(model.section("linear").integer("heads", 0), 4);
  EXPECT_EQ(model.integer_list("list", {}), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(model.string("name", ""), "quoted");
  EXPECT_EQ(model.string("word", ""), "gdn");
  EXPECT_NO_THROW(reader.check_unknown_keys());

  EXPECT_TRUE(throws_invalid_argument([&] { reader.apply_override("model.layers"); }, {"expected section.key=value"}));
  EXPECT_TRUE(throws_invalid_argument([&] { reader.apply_override("model.layers="); }, {"missing value"}));
  EXPECT_TRUE(throws_invalid_argument([&] { reader.apply_override("model..x=1"); }, {"not a dotted key"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { reader.apply_override("model.layers.x=1"); }, {"'model.layers' is not a table"}));
  EXPECT_TRUE(throws_invalid_argument([&] { reader.apply_override("model=1"); }, {"'model' is a table"}));
  // A wrong type set on the command line says so.
  reader.apply_override("model.layers=many");
  EXPECT_TRUE(throws_invalid_argument(
      [&] { model.integer("layers", 0); },
      {"m.toml: model.layers: expected an integer, got a string", "set on the command line by 'model.layers=many'"}));
}

TEST(ConfigReader, FileAndParseErrorsNameTheFile) {
  EXPECT_TRUE(throws_invalid_argument([] { ConfigReader::from_file("/nonexistent/x.toml"); },
                                      {"cannot open config file '/nonexistent/x.toml'"}));
  EXPECT_TRUE(throws_invalid_argument([] { ConfigReader::from_string("[model]\nlayers = = 3\n", "bad.toml"); },
                                      {"bad.toml:2:", "TOML parse error"}));
}

// ---- ModelConfig -------------------------------------------------------------------------------

// recompute (default false) moves the delta rule's kept chunk intermediates between the layer's
// saved buffer and the backward's workspace in the memory model; the total stays the same.
TEST(ModelConfig, RecomputeIsReadAndMovesKeptBuffersIntoTheWorkspace) {
  const ModelConfig saving = parse_model(kSmall);
  const ModelConfig recomputing = parse_model(kSmall, {"model.linear.recompute=true"});
  const auto& s = dynamic_cast<const DeltaRuleConfig&>(saving.layer_config(0));
  const auto& r = dynamic_cast<const DeltaRuleConfig&>(recomputing.layer_config(0));
  EXPECT_FALSE(s.recompute);
  EXPECT_TRUE(r.recompute);
  const MixerFamily& family = mixer_family("gdn");
  const int64_t tokens = 4096;
  EXPECT_GT(family.cuda_saved_bytes(s, tokens), 0.0);
  EXPECT_EQ(family.cuda_saved_bytes(r, tokens), 0.0);
  EXPECT_DOUBLE_EQ(family.cuda_saved_bytes(s, tokens) + family.cuda_workspace_bytes(s, tokens),
                   family.cuda_workspace_bytes(r, tokens));
  // At d_k = d_v = 128 a GDN head keeps 1412 bytes per token (what the bf16 plan measured on the
  // H200: 0.6895 GiB for 32768 tokens × 16 heads).
  const ModelConfig wide =
      parse_model(kSmall, {"model.linear.heads=1", "model.linear.d_k=128", "model.linear.d_v=128"});
  EXPECT_DOUBLE_EQ(family.cuda_saved_bytes(wide.layer_config(0), 1), 1412.0);
  EXPECT_TRUE(throws_invalid_argument([] { parse_model(kSmall, {"model.linear.recompute=3"}); },
                                      {"model.linear.recompute", "expected a boolean"}));
}

// The gla family's recompute (default false, in every mixer's table) does the same for the mixers
// whose bf16 CUDA step runs on the delta rule's pipeline as its plain write (gla, retnet, hgrn2,
// mamba2, rwkv6).
TEST(ModelConfig, GlaRecomputeIsReadAndMovesKeptBuffersIntoTheWorkspace) {
  const int64_t tokens = 4096;
  for (const std::string mixer : {"gla", "retnet", "hgrn2", "mamba2", "rwkv6"}) {
    const std::vector<std::string> base = {"model.mixer=" + mixer, "model.hybrid=pure"};
    std::vector<std::string> with_recompute = base;
    with_recompute.push_back("model.gla.recompute=true");
    const ModelConfig saving = parse_model(kSmall, base), recomputing = parse_model(kSmall, with_recompute);
    const MixerConfig& s = saving.layer_config(0);
    const MixerConfig& r = recomputing.layer_config(0);
    const MixerFamily& family = mixer_family(mixer);
    EXPECT_GT(family.cuda_saved_bytes(s, tokens), 0.0) << mixer;  // RWKV-6's bonus readout too
    EXPECT_EQ(family.cuda_saved_bytes(r, tokens), 0.0) << mixer;
    EXPECT_DOUBLE_EQ(family.cuda_saved_bytes(s, tokens) + family.cuda_workspace_bytes(s, tokens),
                     family.cuda_workspace_bytes(r, tokens))
        << mixer;
  }
  // Per token and head at K = V = 128 a GLA head (a decay per channel) keeps h (2·K·V/64 = 512
  // bytes), G_L (4·K/64 = 8), K ⊙ exp(G_L − G) and scale Q ⊙ γ (2·K each) and scale P (2·64):
  // 1160 bytes; a Mamba-2 head (K = 128, V = 64, one decay per token) h (256) and G (4): 260.
  const ModelConfig gla = parse_model(kSmall, {"model.mixer=gla", "model.hybrid=pure", "model.gla.heads=1",
                                               "model.gla.expand_k=2", "model.gla.expand_v=2"});
  EXPECT_DOUBLE_EQ(mixer_family("gla").cuda_saved_bytes(gla.layer_config(0), 1), 1160.0);
  const ModelConfig mamba2 = parse_model(kSmall, {"model.mixer=mamba2", "model.hybrid=pure"});
  const auto& m = dynamic_cast<const Mamba2Config&>(mamba2.layer_config(0));
  EXPECT_EQ(m.heads, 2);
  EXPECT_DOUBLE_EQ(mixer_family("mamba2").cuda_saved_bytes(m, 1), 2 * 260.0);
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        parse_model(kSmall, {"model.mixer=gla", "model.gla.recompute=3"});
      },
      {"model.gla.recompute", "expected a boolean"}));
}

TEST(ModelConfig, ParsesAndDerivesDefaults) {
  const ModelConfig c = parse_model(kSmall);
  EXPECT_EQ(c.mixer, "gdn");
  EXPECT_EQ(c.attention_layers, (std::vector<int64_t>{3}));
  EXPECT_EQ(c.layer_mixers, (std::vector<std::string>{"gdn", "gdn", "gdn", "attention"}));
  EXPECT_EQ(c.mlp_hidden, 256);  // 256 · ceil(int(64 · 8/3) / 256)
  const auto& l = dynamic_cast<const DeltaRuleConfig&>(c.layer_config(0));
  const auto& a = dynamic_cast<const AttentionConfig&>(c.layer_config(3));
  EXPECT_EQ(l.section, "model.linear");
  EXPECT_EQ(l.decay_rank, 32);
  EXPECT_EQ(a.head_dim, 16);
  EXPECT_EQ(a.kv_heads, 4);
  EXPECT_TRUE(l.output_gate);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(default_mlp_hidden(1024), 2816);
  EXPECT_EQ(default_mlp_hidden(2048), 5632);

  const ModelConfig d = parse_model(kSmall, {"model.mixer=deltanet", "model.hybrid=pure"});
  EXPECT_FALSE(dynamic_cast<const DeltaRuleConfig&>(d.layer_config(0)).output_gate);  // DeltaNet's default
  EXPECT_TRUE(d.attention_layers.empty());
  const ModelConfig t = parse_model(kSmall, {"model.mixer=attention", "model.hybrid=pure"});
  EXPECT_EQ(t.attention_layers, (std::vector<int64_t>{0, 1, 2, 3}));
  const ModelConfig listed = parse_model(kSmall, {"model.hybrid=[2, 0]"});
  EXPECT_EQ(listed.attention_layers, (std::vector<int64_t>{0, 2}));

  const auto backend = [](const ModelConfig& m) {
    return dynamic_cast<const AttentionConfig&>(m.layer_config(3)).backend;
  };
  EXPECT_EQ(a.backend, ops::AttentionBackend::automatic);
  EXPECT_EQ(backend(parse_model(kSmall, {"model.attention.backend=cudnn"})), ops::AttentionBackend::cudnn);
  EXPECT_EQ(backend(parse_model(kSmall, {"model.attention.backend=own"})), ops::AttentionBackend::own);

  // cudnn_autotune: off by default (the heuristics' first plan); true times the candidates.
  const auto autotune = [](const ModelConfig& m) {
    return dynamic_cast<const AttentionConfig&>(m.layer_config(3)).cudnn_autotune;
  };
  EXPECT_FALSE(a.cudnn_autotune);
  EXPECT_FALSE(autotune(parse_model(kSmall, {"model.attention.cudnn_autotune=false"})));
  EXPECT_TRUE(autotune(parse_model(kSmall, {"model.attention.cudnn_autotune=true"})));
  EXPECT_FALSE(ops::AttentionShape{}.cudnn_autotune);  // the op's default agrees with the config's
}

// Whether parsing `text` with `overrides` throws std::invalid_argument naming every fragment.
::testing::AssertionResult parse_fails(const std::string& text, const std::vector<std::string>& overrides,
                                       const std::vector<std::string>& fragments) {
  return throws_invalid_argument([&] { parse_model(text, overrides); }, fragments);
}

TEST(ModelConfig, ErrorsNameTheFileAndKey) {
  const auto fails = [](const std::vector<std::string>& overrides, const std::vector<std::string>& fragments) {
    return parse_fails(kSmall, overrides, fragments);
  };
  EXPECT_TRUE(fails({"model.d_modle=3"}, {"test.toml: unknown key 'model.d_modle'", "did you mean 'model.d_model'"}));
  EXPECT_TRUE(fails({"model.layers=\"24\""}, {"test.toml: model.layers: expected an integer >= 1, got a string"}));
  EXPECT_TRUE(fails({"model.layers=0"}, {"test.toml: model.layers: expected an integer >= 1, got 0"}));
  EXPECT_TRUE(fails({"model.mixer=mamba"}, {"model.mixer: expected one of deltanet, gdn, kda, gdn2, attention"}));
  EXPECT_TRUE(fails({"model.norm_eps=0"}, {"model.norm_eps: expected a positive number"}));
  EXPECT_TRUE(fails({"model.linear.d_k=0", "model.linear.heads=3"},
                    {"model.linear.heads: d_model 64 is not divisible by 3 heads; set model.linear.d_k"}));
  EXPECT_TRUE(
      fails({"model.attention.kv_heads=3"}, {"model.attention.kv_heads: heads 4 is not a multiple of kv_heads 3"}));
  EXPECT_TRUE(fails({"model.attention.head_dim=15"}, {"model.attention.head_dim: RoPE needs an even head_dim"}));
  EXPECT_TRUE(fails({"model.attention.backend=flash"}, {"model.attention.backend: expected one of auto, cudnn, own"}));
  EXPECT_TRUE(fails({"model.attention.cudnn_autotune=1"},
                    {"test.toml: model.attention.cudnn_autotune: expected a boolean (true or false), got an integer"}));
  EXPECT_TRUE(fails({"model.attention.cudnn_autotune=\"yes\""},
                    {"model.attention.cudnn_autotune: expected a boolean (true or false), got a string"}));
  EXPECT_TRUE(fails({"model.attention.cudnn_autotun=false"}, {"test.toml: unknown key 'model.attention.cudnn_autotun'",
                                                              "did you mean 'model.attention.cudnn_autotune'"}));
  EXPECT_TRUE(fails({"model.linear.conv=-1"}, {"model.linear.conv: expected an integer >= 0"}));
  EXPECT_TRUE(fails({"model.hybrid=3:2"}, {"test.toml: model.hybrid: expected \"pure\", a ratio \"r:1\"", "'3:2'"}));
  EXPECT_TRUE(fails({"model.hybrid=x:1"}, {"model.hybrid", "'x:1'"}));
  EXPECT_TRUE(fails({"model.hybrid=0:1"}, {"model.hybrid", "'0:1'"}));
  EXPECT_TRUE(fails({"model.hybrid=[1, 4]"}, {"model.hybrid: attention layer 4 is outside [0, 4)"}));
  EXPECT_TRUE(fails({"model.hybrid=[1, 1]"}, {"model.hybrid: attention layer 1 is listed twice"}));
  EXPECT_TRUE(fails({"model.mixer=attention"}, {"model.hybrid: a hybrid layout needs a linear mixer"}));
  EXPECT_TRUE(throws_invalid_argument([] { parse_model("[model]\nd_model = 8\nlayers = 1\nvocab = 5\n"); },
                                      {"test.toml: model.mixer: missing"}));
}

// model.layer_mixers: every layer's mixer by name, each mixer configured from [model.<mixer>] or
// its family's shared table.
TEST(ModelConfig, LayerMixersNameEveryLayer) {
  const std::string base = R"(
[model]
d_model = 64
layers = 6
vocab = 100
layer_mixers = "2*gdn,kda"

[model.linear]
heads = 2

[model.kda]
heads = 4
d_v = 8

[model.attention]
heads = 4
)";
  const ModelConfig c = parse_model(base);
  EXPECT_EQ(c.layer_mixers, (std::vector<std::string>{"gdn", "gdn", "kda", "gdn", "gdn", "kda"}));
  EXPECT_EQ(c.mixers_description(), "2*gdn,kda");
  const auto& gdn = dynamic_cast<const DeltaRuleConfig&>(c.layer_config(0));
  const auto& kda = dynamic_cast<const DeltaRuleConfig&>(c.layer_config(2));
  EXPECT_EQ(gdn.section, "model.linear");
  EXPECT_EQ(gdn.heads, 2);
  EXPECT_EQ(gdn.d_k, 32);
  EXPECT_EQ(kda.section, "model.kda");
  EXPECT_EQ(kda.heads, 4);
  EXPECT_EQ(kda.d_k, 16);
  EXPECT_EQ(kda.d_v, 8);
  EXPECT_EQ(kda.preset.decay, ops::DecayKind::channel);
  EXPECT_TRUE(c.attention_layers.empty());
  // A list names one mixer per layer ("N*name" terms too); every family's table is read, used or not.
  const ModelConfig listed = parse_model(base, {"model.layer_mixers=[\"kda\", \"attention\", \"4*gdn\"]"});
  EXPECT_EQ(listed.layer_mixers, (std::vector<std::string>{"kda", "attention", "gdn", "gdn", "gdn", "gdn"}));
  EXPECT_EQ(dynamic_cast<const AttentionConfig&>(listed.layer_config(1)).head_dim, 16);

  const auto fails = [&](const std::vector<std::string>& overrides, const std::vector<std::string>& fragments) {
    return parse_fails(base, overrides, fragments);
  };
  EXPECT_TRUE(fails({"model.mixer=gdn"}, {"test.toml: model.layer_mixers: give either layer_mixers or mixer"}));
  EXPECT_TRUE(fails({"model.layer_mixers=\"gdn,mamba\""},
                    {"model.layer_mixers: term 'mamba': unknown mixer 'mamba'; expected one of deltanet, gdn"}));
  EXPECT_TRUE(fails({"model.layer_mixers=\"0*gdn\""}, {"model.layer_mixers: term '0*gdn'"}));
  EXPECT_TRUE(fails({"model.layer_mixers=\"3*gdn,attention\""},
                    {"model.layer_mixers: the pattern covers 4 layers, which does not divide 6 layers"}));
  EXPECT_TRUE(fails({"model.layer_mixers=[\"gdn\", \"kda\"]"},
                    {"model.layer_mixers: a list names one mixer per layer: 2 mixers for 6 layers"}));
  EXPECT_TRUE(fails({"model.kda.heads=3"}, {"test.toml: model.kda.heads: d_model 64 is not divisible by 3 heads; set "
                                            "model.kda.d_k"}));
  EXPECT_TRUE(fails({"model.kda.hedas=3"}, {"unknown key 'model.kda.hedas'"}));
}

// A config that names its mixers by model.mixer and model.hybrid resolves to the keys it always did
// (a resumed run compares them): no layer_mixers, no [model.<mixer>] table.
TEST(ModelConfig, MixerAndHybridResolveAsBefore) {
  ConfigReader reader = ConfigReader::from_string(kSmall, "test.toml");
  ModelConfig::parse(reader.section("model"));
  const std::string resolved = reader.resolved();
  EXPECT_EQ(resolved.find("layer_mixers"), std::string::npos) << resolved;
  EXPECT_EQ(resolved.find("[model.gdn]"), std::string::npos) << resolved;
  EXPECT_NE(resolved.find("output_gate = true"), std::string::npos) << resolved;
  EXPECT_NE(resolved.find("rope_theta"), std::string::npos) << resolved;
}

TEST(ModelConfig, HybridRules) {
  EXPECT_EQ(hybrid_attention_layers("3:1", 24), (std::vector<int64_t>{3, 7, 11, 15, 19, 23}));
  EXPECT_EQ(hybrid_attention_layers("6:1", 21), (std::vector<int64_t>{6, 13, 20}));
  EXPECT_EQ(hybrid_attention_layers("6:1", 28), (std::vector<int64_t>{6, 13, 20, 27}));
  EXPECT_EQ(hybrid_attention_layers("6:1", 24), (std::vector<int64_t>{6, 13, 20}));
  EXPECT_EQ(hybrid_attention_layers("1:1", 6), (std::vector<int64_t>{1, 3, 5}));
  EXPECT_EQ(hybrid_attention_layers("24:1", 25), (std::vector<int64_t>{24}));
  EXPECT_EQ(hybrid_attention_layers("12:1", 21), (std::vector<int64_t>{12}));
  // Shorter than one group: one attention layer, the last.
  EXPECT_EQ(hybrid_attention_layers("24:1", 24), (std::vector<int64_t>{23}));
  EXPECT_EQ(hybrid_attention_layers("24:1", 21), (std::vector<int64_t>{20}));
  EXPECT_EQ(hybrid_attention_layers("3:1", 3), (std::vector<int64_t>{2}));
  EXPECT_EQ(hybrid_attention_layers("3:1", 1), (std::vector<int64_t>{0}));
  // Every ratio of seed 001 resolves on every depth from 1 to 48 layers: at least one attention
  // layer, indices strictly increasing inside the stack, the last group's attention at its end.
  for (int64_t r : {24, 12, 6, 3}) {
    for (int64_t layers = 1; layers <= 48; ++layers) {
      const std::vector<int64_t> at = hybrid_attention_layers(std::to_string(r) + ":1", layers);
      ASSERT_FALSE(at.empty()) << r << ":1 on " << layers;
      EXPECT_EQ(static_cast<int64_t>(at.size()), std::max<int64_t>(1, layers / (r + 1))) << r << ":1 on " << layers;
      for (size_t i = 0; i < at.size(); ++i) {
        EXPECT_TRUE(at[i] >= 0 && at[i] < layers && (i == 0 || at[i] > at[i - 1])) << r << ":1 on " << layers;
      }
    }
  }
  EXPECT_TRUE(hybrid_attention_layers("pure", 24).empty());
  EXPECT_THROW(hybrid_attention_layers("3", 24), std::invalid_argument);
  EXPECT_THROW(hybrid_attention_layers("3:1:1", 24), std::invalid_argument);
}

// ---- parameter counts --------------------------------------------------------------------------

// The parameter count of a config written out from reference/mixers.md §1 and §4, layer by layer.
int64_t expected_parameters(const ModelConfig& c) {
  const int64_t d = c.d_model;
  int64_t total = c.vocab * d * (c.tie_embeddings ? 1 : 2) + d;  // embedding, head, final norm
  bool lower_bounds = false;  // HGRN's and HGRN-2's Γ, one per stack: [layers, channels]
  for (int64_t layer = 0; layer < c.layers; ++layer) {
    total += d + (c.mlp ? d + 3 * d * c.mlp_hidden : 0);  // attn_norm; mlp_norm and SwiGLU
    const std::string& mixer = c.layer_mixers[size_t(layer)];
    const MixerConfig& config = c.layer_config(layer);
    if (mixer == "attention") {
      const auto& a = dynamic_cast<const AttentionConfig&>(config);
      total += 2 * d * a.heads * a.head_dim + 2 * d * a.kv_heads * a.head_dim;
      continue;
    }
    if (mixer == "gla" || mixer == "retnet") {  // q, k, v, g, o, the per-head norm; GLA's low-rank decay
      const bool gla = mixer == "gla";
      const HeadWidths& w =
          gla ? dynamic_cast<const GlaConfig&>(config).widths : dynamic_cast<const RetNetConfig&>(config).widths;
      const int64_t HK = w.heads * w.d_k, HV = w.heads * w.d_v;
      const bool gate = !gla || dynamic_cast<const GlaConfig&>(config).output_gate;
      total += 2 * d * HK + d * HV + (gate ? d * HV : 0) + HV * d + w.d_v;
      if (gla) {
        const int64_t rank = dynamic_cast<const GlaConfig&>(config).gate_rank;
        total += d * rank + rank * HK + HK;  // gk_proj.0, gk_proj.1 and its bias
      }
      continue;
    }
    if (mixer == "hgrn2") {  // q, f, i, the norm over H·V, o
      const auto& h = dynamic_cast<const Hgrn2Config&>(config);
      const int64_t HK = h.heads * h.expand_ratio, HV = h.heads * h.d_v;
      total += 2 * d * HK + d * HV + HV + HV * d;
      if (h.lower_bound && !lower_bounds) total += c.layers * HK, lower_bounds = true;
      continue;
    }
    if (mixer == "hgrn") {  // i, f, g, the norm over W, o
      const auto& h = dynamic_cast<const HgrnConfig&>(config);
      total += 3 * d * h.width + h.width + h.width * d;
      if (h.lower_bound && !lower_bounds) total += c.layers * h.width, lower_bounds = true;
      continue;
    }
    if (mixer == "mamba2") {  // z, x, B, C, dt; the convs with bias; A_log, dt_bias, D; norm; out
      const auto& m = dynamic_cast<const Mamba2Config&>(config);
      const int64_t conv_channels = m.inner + 2 * m.state_size;
      total +=
          d * (conv_channels + m.inner + m.heads) + conv_channels * (m.conv + 1) + 3 * m.heads + m.inner + m.inner * d;
      continue;
    }
    if (mixer == "rwkv6") {  // μ, five lerp LoRAs with biases, r, k, v, g, w's LoRA, u, GroupNorm, o
      const auto& r = dynamic_cast<const Rwkv6Config&>(config);
      const int64_t HK = r.widths.heads * r.widths.d_k, HV = r.widths.heads * r.widths.d_v;
      total += d + 5 * (2 * d * r.proj_rank + d) + 2 * d * HK + 2 * d * HV + d * r.decay_rank + r.decay_rank * HK + HK +
               HK + 2 * HV + HV * d;
      continue;
    }
    const auto& l = dynamic_cast<const DeltaRuleConfig&>(c.layer_config(layer));
    const int64_t H = l.heads, HK = l.heads * l.d_k, HV = l.heads * l.d_v;
    total += d * (2 * HK + HV) + HV * d + l.d_v + l.conv * (2 * HK + HV);  // q, k, v, o, o_norm, convs
    if (mixer == "deltanet") {
      total += d * H + (l.output_gate ? d * HV : 0);
    } else if (mixer == "gdn") {
      total += 2 * d * H + 2 * H + (l.output_gate ? d * HV : 0);  // a, b, A_log, dt_bias, g
    } else {                                                      // kda, gdn2
      total += (mixer == "kda" ? d * H : d * (HK + HV));          // β, or erase and write gates
      total += d * l.decay_rank + l.decay_rank * HK + H + HK;     // f_proj, A_log, dt_bias
      total += l.output_gate ? d * l.gate_rank + l.gate_rank * HV + HV : 0;
    }
  }
  return total;
}

std::filesystem::path source_dir() {
  if (const char* dir = std::getenv("LINEA_SOURCE_DIR")) return dir;
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
}

TEST(ParameterCount, ConfigsMatchTheirFormulaAndName) {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() / "configs" / "models")) {
    const std::string name = entry.path().stem().string();
    ConfigReader reader = ConfigReader::from_file(entry.path().string());
    const ModelConfig config = ModelConfig::parse(reader.section("model"));
    reader.check_unknown_keys();
    const ParameterCount count = count_parameters(config);
    EXPECT_EQ(count.total, expected_parameters(config)) << name;
    int64_t by_group = 0, by_role = 0;
    for (const auto& g : count.groups) by_group += g.count;
    for (const auto& r : count.roles) by_role += r.count;
    EXPECT_EQ(by_group, count.total) << name;
    EXPECT_EQ(by_role, count.total) << name;
    // "340M" and "1.3B" in flame's sense: the non-embedding part plus one vocabulary table
    // (untied heads add another 33M / 66M on top), within the spread of the seed papers' shapes.
    const double sized = double(count.non_embedding + config.vocab * config.d_model);
    if (name.find("-340m") != std::string::npos) {
      EXPECT_NEAR(sized / 340e6, 1.0, 0.20) << name << ": " << sized;
      ++checked;
    } else if (name.find("-1.3b") != std::string::npos) {
      EXPECT_NEAR(sized / 1.3e9, 1.0, 0.20) << name << ": " << sized;
      ++checked;
    }
  }
  EXPECT_GE(checked, 10);
}

TEST(ParameterCount, KnownTotals) {
  // Hand-computed: transformer 340M = 24·(4·1024² + 3·1024·2816 + 2·1024) + 2·32000·1024 + 1024.
  ModelConfig t;
  t.d_model = 1024, t.layers = 24, t.vocab = 32000, t.mixer = "attention";
  t.mixer_config<AttentionConfig>("attention").heads = 16;
  t.mixer_config<AttentionConfig>("attention").head_dim = 64;
  EXPECT_EQ(count_parameters(t).total, 373867520);
  // GDN 1.3B (flame's gated_deltanet_1B shape): ≈1.26B non-embedding (reference/mixers.md §4.1).
  ModelConfig g;
  g.d_model = 2048, g.layers = 21, g.vocab = 32000, g.mixer = "gdn";
  DeltaRuleConfig& gl = g.mixer_config<DeltaRuleConfig>("gdn");
  gl.heads = 6, gl.d_k = 256, gl.d_v = 512;
  const ParameterCount gc = count_parameters(g);
  EXPECT_NEAR(gc.non_embedding / 1e9, 1.26, 0.005);
  EXPECT_EQ(gc.group("embedding"), 32000 * 2048);
  EXPECT_EQ(gc.group("head"), 32000 * 2048);
  EXPECT_EQ(gc.group("attention"), 0);
  // Counting never allocates: ≈ 0.9 trillion parameters (3.6 TB of f32) are counted instantly.
  ModelConfig huge = g;
  huge.d_model = 32768, huge.layers = 96;
  DeltaRuleConfig& hl = huge.mixer_config<DeltaRuleConfig>("gdn");
  hl.heads = 64, hl.d_k = 512, hl.d_v = 1024;
  EXPECT_GT(count_parameters(huge).total, int64_t(800e9));
  const std::string table = format_parameter_count(g, gc);
  EXPECT_NE(table.find("linear mixers"), std::string::npos) << table;
  EXPECT_NE(table.find("non-embedding"), std::string::npos) << table;
}

}  // namespace
}  // namespace linea

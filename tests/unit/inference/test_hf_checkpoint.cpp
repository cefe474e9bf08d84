// fla / Hugging Face checkpoints (inference/hf_checkpoint.h): export writes fla's config.json and
// model.safetensors with fla's names and layouts (the names of every mixer's layer as read from
// fla's modules; Mamba-2's fused in_proj and conv1d in fla's order); importing them into a freshly
// initialised model of the same config gives every exported weight back (equal parameters, equal
// logits) for every mixer fla has a model for, pure and with attention layers (GLA and RetNet also
// with their short convs), and a transformer;
// an unknown model_type, another architecture's model_type, a shape mismatch (plain and fused) and a
// truncated file are refused naming the file and tensor (and both shapes); a model fla cannot
// express (GDN-2, RWKV-6, settings fla's models lack) is refused naming the key, before anything is
// written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "data/config_reader.h"
#include "inference/hf_checkpoint.h"
#include "model/mixers/gla/gla_configs.h"
#include "model/mixers/hgrn/hgrn_config.h"
#include "model/model.h"
#include "tests/testing/kernel_test.h"
#include "tests/testing/model_inputs.h"
#include "tests/testing/temp_dir.h"

namespace linea {
namespace {

// The inference tests' tiny hybrid (attention at layer 1) with the low-rank widths fla's GLA
// model has (16); `pure`: every layer the linear mixer. Mamba-2's blocks have no MLP and fla's
// Mamba-2 has no attention layers.
ModelConfig tiny(const std::string& mixer, bool tied, int64_t d_k = 8, bool pure = false) {
  testing::TinyHybridSizes sizes = testing::kInferenceSizes;
  sizes.d_k = d_k;
  sizes.decay_rank = sizes.gate_rank = mixer == "gla" ? 16 : 8;
  ModelConfig c = testing::tiny_hybrid_config(mixer, tied, sizes);
  if (pure || mixer == "mamba2") {
    c.hybrid = "pure";
    c.attention_layers.clear();
  }
  c.mlp = mixer != "mamba2";
  return c;
}

Tensor all_logits(Model& model) {
  const testing::PackedBatch batch = testing::packed_batch({5, 7}, model.config().vocab, 3);
  std::vector<int64_t> rows(12);
  for (int64_t i = 0; i < 12; ++i) rows[i] = i;
  return model.logits(batch.ids, batch.seqs, rows);
}

// Every parameter drawn, norm gains, biases and gate parameters away from their init too, so
// that no tensor of two models keeps the same values.
void draw(Model& model, uint64_t seed) {
  model.init_parameters(seed);
  Rng rng(seed + 100);
  for (Parameter& p : model.params().params()) {
    if (p.role == ParamRole::vector || p.role == ParamRole::gate) fill_uniform(p.value, rng, 0.5, 1.5);
  }
}

template <class E>
::testing::AssertionResult throws_with(const std::function<void()>& fn, const std::vector<std::string>& fragments) {
  try {
    fn();
    return ::testing::AssertionFailure() << "no exception";
  } catch (const E& e) {
    const std::string message = e.what();
    for (const std::string& f : fragments) {
      if (message.find(f) == std::string::npos) return ::testing::AssertionFailure() << message << " lacks " << f;
    }
    return ::testing::AssertionSuccess();
  }
}

TEST(HfCheckpoint, ExportWritesFlasNamesLayoutsAndConfig) {
  testing::TempDir dir;
  Model model(tiny("gdn", false));
  model.init_parameters(1);
  inference::export_hf(model, dir / "out");
  std::ifstream in(dir / "out" / "config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  EXPECT_EQ(config["model_type"], "gated_deltanet");
  EXPECT_EQ(config["hidden_size"], 16);
  EXPECT_EQ(config["head_dim"], 8);
  EXPECT_EQ(config["num_heads"], 2);
  EXPECT_EQ(config["intermediate_size"], 24);
  EXPECT_EQ(config["attn"]["layers"], nlohmann::json::array({1}));
  EXPECT_EQ(config["attn"]["num_kv_heads"], 2);
  const SafetensorsFile file(dir / "out" / "model.safetensors");
  EXPECT_EQ(file.shape("model.layers.0.attn.q_conv1d.weight"), (Shape{16, 1, 4}));
  EXPECT_EQ(file.shape("model.embeddings.weight"), (Shape{23, 16}));
  EXPECT_TRUE(file.contains("lm_head.weight"));
  EXPECT_TRUE(file.contains("model.layers.1.attn.k_proj.weight"));
  EXPECT_TRUE(file.contains("model.layers.2.mlp.down_proj.weight"));
  EXPECT_TRUE(file.contains("model.layers.2.attn.A_log"));
  EXPECT_EQ(file.names().size(), model.params().params().size());
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir / "out"), {}), 2);  // no temporaries left
}

// fla's tensor names of layer 0 (the linear layer) and of the stack, as fla's modules name them
// (fla/layers/{gla,multiscale_retention,hgrn,hgrn2,mamba2}.py and the models around them).
TEST(HfCheckpoint, GlaFamilyAndHgrnTakeFlasNames) {
  struct Case {
    std::string mixer, model_type;
    std::set<std::string> names;
  };
  const std::string l0 = "model.layers.0.attn.";
  const std::set<std::string> block = {"model.layers.0.attn_norm.weight", "model.layers.0.mlp_norm.weight",
                                       "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight",
                                       "model.layers.0.mlp.down_proj.weight"};
  const std::vector<Case> cases = {
      {"gla",
       "gla",
       {"q_proj.weight", "k_proj.weight", "v_proj.weight", "g_proj.weight", "gk_proj.0.weight", "gk_proj.1.weight",
        "gk_proj.1.bias", "g_norm_swish_gate.weight", "o_proj.weight"}},
      {"retnet",
       "retnet",
       {"q_proj.weight", "k_proj.weight", "v_proj.weight", "g_proj.weight", "g_norm_swish_gate.weight",
        "o_proj.weight"}},
      {"hgrn", "hgrn", {"i_proj.weight", "f_proj.weight", "g_proj.weight", "g_norm.weight", "o_proj.weight"}},
      {"hgrn2", "hgrn2", {"q_proj.weight", "f_proj.weight", "i_proj.weight", "g_norm.weight", "o_proj.weight"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.mixer);
    testing::TempDir dir;
    Model model(tiny(c.mixer, false));
    model.init_parameters(1);
    inference::export_hf(model, dir.path());
    std::ifstream in(dir / "config.json");
    EXPECT_EQ(nlohmann::json::parse(in)["model_type"], c.model_type);
    const SafetensorsFile file(dir / "model.safetensors");
    std::set<std::string> layer0;
    for (const std::string& name : file.names()) {
      if (name.rfind("model.layers.0.", 0) == 0) layer0.insert(name);
    }
    std::set<std::string> expected = block;
    for (const std::string& n : c.names) expected.insert(l0 + n);
    EXPECT_EQ(layer0, expected);
    EXPECT_EQ(file.contains("model.lower_bounds"), c.mixer == "hgrn" || c.mixer == "hgrn2");
    EXPECT_TRUE(file.contains("model.layers.1.attn.o_proj.weight"));  // the attention layer
  }
}

TEST(HfCheckpoint, Mamba2IsFlasBackboneWithFusedProjections) {
  testing::TempDir dir;
  Model model(tiny("mamba2", false));
  model.init_parameters(1);
  inference::export_hf(model, dir.path());
  std::ifstream in(dir / "config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  EXPECT_EQ(config["model_type"], "mamba2");
  EXPECT_EQ(config["num_heads"], 2);
  EXPECT_EQ(config["head_dim"], 16);
  EXPECT_EQ(config["state_size"], 8);
  EXPECT_FALSE(config.contains("intermediate_size"));
  EXPECT_FALSE(config.contains("attn"));
  const SafetensorsFile file(dir / "model.safetensors");
  const std::string m = "backbone.layers.2.mixer.";
  const std::vector<std::string> listed = file.names();
  const std::set<std::string> names(listed.begin(), listed.end());
  const std::set<std::string> expected = {"backbone.embeddings.weight",
                                          "backbone.norm_f.weight",
                                          "lm_head.weight",
                                          "backbone.layers.2.norm.weight",
                                          m + "in_proj.weight",
                                          m + "conv1d.weight",
                                          m + "conv1d.bias",
                                          m + "A_log",
                                          m + "dt_bias",
                                          m + "D",
                                          m + "norm.weight",
                                          m + "out_proj.weight"};
  for (const std::string& n : expected) EXPECT_TRUE(names.count(n)) << n;
  EXPECT_EQ(names.size(), 3 + 3 * (expected.size() - 3));
  // d_in = 32, N = 8, H = 2: in_proj rows z (32), x (32), B (8), C (8), dt (2); conv1d x, B, C.
  EXPECT_EQ(file.shape(m + "in_proj.weight"), (Shape{82, 16}));
  EXPECT_EQ(file.shape(m + "conv1d.weight"), (Shape{48, 1, 4}));
  EXPECT_EQ(file.shape(m + "conv1d.bias"), (Shape{48}));
  const auto rows_equal = [&](const std::string& fla, int64_t row, const std::string& linea) {
    const Tensor fused = file.read_f32(fla);
    const Tensor part = model.params().find("layers.2.mixer." + linea)->value;
    const int64_t width = fused.numel() / fused.dim(0);
    for (int64_t i = 0; i < part.numel(); ++i) {
      if (fused.data<float>()[row * width + i] != part.data<float>()[i]) return false;
    }
    return true;
  };
  EXPECT_TRUE(rows_equal(m + "in_proj.weight", 0, "z_proj.weight"));
  EXPECT_TRUE(rows_equal(m + "in_proj.weight", 32, "x_proj.weight"));
  EXPECT_TRUE(rows_equal(m + "in_proj.weight", 64, "B_proj.weight"));
  EXPECT_TRUE(rows_equal(m + "in_proj.weight", 72, "C_proj.weight"));
  EXPECT_TRUE(rows_equal(m + "in_proj.weight", 80, "dt_proj.weight"));
  EXPECT_TRUE(rows_equal(m + "conv1d.weight", 0, "x_conv1d.weight"));
  EXPECT_TRUE(rows_equal(m + "conv1d.weight", 32, "B_conv1d.weight"));
  EXPECT_TRUE(rows_equal(m + "conv1d.weight", 40, "C_conv1d.weight"));
  EXPECT_TRUE(rows_equal(m + "conv1d.bias", 40, "C_conv1d.bias"));
}

TEST(HfCheckpoint, ImportGivesTheExportedModelBack) {
  struct Case {
    std::string mixer;
    bool pure;
    int64_t conv = 0;  // GLA's and RetNet's short convs
  };
  std::vector<Case> cases = {{"attention", true}, {"mamba2", true}, {"gla", true, 4}, {"retnet", true, 4}};
  for (const char* mixer : {"deltanet", "gdn", "kda", "gla", "retnet", "hgrn", "hgrn2"}) {
    cases.push_back({mixer, false});
    cases.push_back({mixer, true});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.mixer + (c.pure ? " pure" : " hybrid") + " conv " + std::to_string(c.conv));
    const bool tied = c.mixer == "kda" || c.mixer == "hgrn";
    ModelConfig config = tiny(c.mixer, tied, 8, c.pure);
    if (c.mixer == "gla") config.mixer_config<GlaConfig>("gla").conv = c.conv;
    if (c.mixer == "retnet") config.mixer_config<RetNetConfig>("retnet").conv = c.conv;
    testing::TempDir dir;
    Model original(config);
    draw(original, 1);
    inference::export_hf(original, dir.path());
    Model imported(config);
    draw(imported, 2);
    inference::import_hf(imported, dir.path());
    const Tensor p = original.params().values(), q = imported.params().values();
    for (int64_t i = 0; i < p.numel(); ++i) ASSERT_EQ(p.data<float>()[i], q.data<float>()[i]) << i;
    const Tensor a = all_logits(original), b = all_logits(imported);
    for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]);
  }
}

TEST(HfCheckpoint, BadCheckpointsNameTheFileAndTensor) {
  testing::TempDir dir;
  Model model(tiny("gdn", false));
  model.init_parameters(1);
  inference::export_hf(model, dir / "gdn");
  Model wider(tiny("gdn", false, 4));
  EXPECT_TRUE(throws_with<std::runtime_error>(
      [&] { inference::import_hf(wider, dir / "gdn"); },
      {"model.safetensors", "model.layers.0.attn.q_proj.weight", "[16, 16]", "needs [8, 16]"}));
  Model kda(tiny("kda", false));
  EXPECT_TRUE(throws_with<std::runtime_error>([&] { inference::import_hf(kda, dir / "gdn"); },
                                              {"config.json", "\"gated_deltanet\"", "kda"}));
  std::ofstream(dir / "gdn" / "config.json") << R"({"model_type": "mamba3"})";
  EXPECT_TRUE(throws_with<std::runtime_error>(
      [&] { inference::import_hf(model, dir / "gdn"); },
      {"config.json", "unknown model_type \"mamba3\"", "transformer", "hgrn2 and mamba2"}));
  inference::export_hf(model, dir / "cut");
  std::filesystem::resize_file(dir / "cut" / "model.safetensors",
                               std::filesystem::file_size(dir / "cut" / "model.safetensors") - 100);
  EXPECT_TRUE(throws_with<std::runtime_error>([&] { inference::import_hf(model, dir / "cut"); },
                                              {"cut/model.safetensors", "truncated"}));
  // A fused tensor names fla's tensor, every linea tensor it holds and both shapes.
  Model mamba2(tiny("mamba2", false));
  mamba2.init_parameters(1);
  inference::export_hf(mamba2, dir / "mamba2");
  ModelConfig smaller_state = tiny("mamba2", false);
  smaller_state.mixer_config<Mamba2Config>("mamba2").state_size = 4;
  Model other(smaller_state);
  EXPECT_TRUE(throws_with<std::runtime_error>(
      [&] { inference::import_hf(other, dir / "mamba2"); },
      {"mamba2/model.safetensors", "backbone.layers.0.mixer.in_proj.weight is [82, 16]",
       "layers.0.mixer.z_proj.weight + layers.0.mixer.x_proj.weight + layers.0.mixer.B_proj.weight + "
       "layers.0.mixer.C_proj.weight + layers.0.mixer.dt_proj.weight need [74, 16]"}));
}

TEST(HfCheckpoint, ModelsFlaCannotExpressAreRefusedBeforeWriting) {
  testing::TempDir dir;
  Model gdn2(tiny("gdn2", false));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { inference::export_hf(gdn2, dir / "gdn2"); },
                                                 {"model.mixer", "'gdn2'", "no GDN-2 model type"}));
  EXPECT_FALSE(std::filesystem::exists(dir / "gdn2"));
  Model rwkv6(tiny("rwkv6", false));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { inference::export_hf(rwkv6, dir / "rwkv6"); },
                                                 {"model.mixer", "'rwkv6'", "channel-mix", "LayerNorm"}));
  EXPECT_FALSE(std::filesystem::exists(dir / "rwkv6"));
  ModelConfig narrow = tiny("attention", false);
  narrow.mixer_config<AttentionConfig>("attention").head_dim = 2;
  Model attention(narrow);
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { inference::export_hf(attention, dir / "a"); },
                                                 {"model.attention.head_dim", "hidden_size / num_heads"}));
  ModelConfig routed = tiny("gdn", false);
  routed.routing.kind = RoutingKind::clvr;
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { inference::hf_config(routed); },
                                                 {"model.routing", "no cross-layer routing", "clvr"}));

  // Settings of the GLA family and HGRN that fla's models have no key for.
  const auto refused = [](ModelConfig c, const std::vector<std::string>& fragments) {
    return throws_with<std::invalid_argument>([&] { inference::hf_config(c); }, fragments);
  };
  ModelConfig gla = tiny("gla", false);
  gla.mixer_config<GlaConfig>("gla").gate_rank = 8;
  EXPECT_TRUE(refused(gla, {"model.gla.gate_rank", "gate_low_rank_dim 16", "this one 8"}));
  gla = tiny("gla", false);
  gla.mixer_config<GlaConfig>("gla").gate_normalizer = 8;
  EXPECT_TRUE(refused(gla, {"model.gla.gate_normalizer", "gate_logit_normalizer 16"}));
  ModelConfig retnet = tiny("retnet", false);
  retnet.mixer_config<RetNetConfig>("retnet").rope_theta = 500000;
  EXPECT_TRUE(refused(retnet, {"model.gla.rope_theta", "base 10000"}));
  ModelConfig hgrn = tiny("hgrn", false);
  hgrn.mixer_config<HgrnConfig>("hgrn").expand_ratio = 2;
  EXPECT_TRUE(refused(hgrn, {"model.hgrn.expand_ratio", "[layers, hidden_size]", "not 2"}));
  hgrn.mixer_config<HgrnConfig>("hgrn").lower_bound = false;
  EXPECT_EQ(inference::hf_config(hgrn)["expand_ratio"], 2);
  ModelConfig hgrn2 = tiny("hgrn2", false);
  hgrn2.mixer_config<Hgrn2Config>("hgrn2").expand_ratio = 32;
  EXPECT_TRUE(refused(hgrn2, {"model.gla.expand_ratio", "none at d_model 16"}));
  hgrn2.d_model = 48;  // one head of 32 forget channels over 48 value channels
  hgrn2.mixer_config<AttentionConfig>("attention").head_dim = 12;
  EXPECT_TRUE(refused(hgrn2, {"model.gla.expand_ratio", "expand_ratio to divide d_model 48"}));
  hgrn2.mixer_config<Hgrn2Config>("hgrn2").lower_bound = false;
  EXPECT_EQ(inference::hf_config(hgrn2)["num_heads"], 1);
  ModelConfig mamba2 = tiny("mamba2", false);
  mamba2.mlp = true;
  EXPECT_TRUE(refused(mamba2, {"model.mlp", "mamba2 blocks have no MLP"}));
  mamba2 = tiny("mamba2", false);
  mamba2.hybrid = "[1]";
  mamba2.attention_layers = {1};
  EXPECT_TRUE(refused(mamba2, {"model.hybrid", "no hybrid attn block", "layer 1"}));
  ModelConfig gla_without_mlp = tiny("gla", false);
  gla_without_mlp.mlp = false;
  EXPECT_TRUE(refused(gla_without_mlp, {"model.mlp", "always have an MLP"}));
}

TEST(HfCheckpoint, InitFromIsReadAndChecked) {
  const std::string base = "[model]\nd_model = 16\nlayers = 2\nvocab = 23\nmixer = \"gdn\"\n";
  ConfigReader good = ConfigReader::from_string(base + "init_from = \"hf:some/dir\"\n", "run.toml");
  EXPECT_EQ(ModelConfig::parse(good.section("model")).init_from, "hf:some/dir");
  ConfigReader bad = ConfigReader::from_string(base + "init_from = \"some/dir\"\n", "run.toml");
  EXPECT_TRUE(testing::throws_invalid_argument([&] { ModelConfig::parse(bad.section("model")); },
                                               {"run.toml", "model.init_from", "hf:DIR"}));
}

}  // namespace
}  // namespace linea

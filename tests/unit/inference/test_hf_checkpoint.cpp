// fla / Hugging Face checkpoints (inference/hf_checkpoint.h): export writes fla's config.json and
// model.safetensors with fla's names and layouts; importing them into a freshly initialised model
// of the same config gives the exported weights back (equal logits) for deltanet, gdn and kda
// hybrids and a transformer; an unknown model_type, another architecture's model_type, a shape
// mismatch and a truncated file are refused naming the file and tensor (and both shapes); a model
// fla cannot express is refused before anything is written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "data/config_reader.h"
#include "inference/hf_checkpoint.h"
#include "model/model.h"
#include "tests/testing/kernel_test.h"
#include "tests/testing/model_inputs.h"
#include "tests/testing/temp_dir.h"

namespace linea {
namespace {

ModelConfig tiny(const std::string& mixer, bool tied, int64_t d_k = 8) {
  testing::TinyHybridSizes sizes = testing::kInferenceSizes;
  sizes.d_k = d_k;
  sizes.decay_rank = sizes.gate_rank = 8;
  return testing::tiny_hybrid_config(mixer, tied, sizes);
}

Tensor all_logits(Model& model) {
  const testing::PackedBatch batch = testing::packed_batch({5, 7}, model.config().vocab, 3);
  std::vector<int64_t> rows(12);
  for (int64_t i = 0; i < 12; ++i) rows[i] = i;
  return model.logits(batch.ids, batch.seqs, rows);
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

TEST(HfCheckpoint, ImportGivesTheExportedModelBack) {
  for (const std::string mixer : {"deltanet", "gdn", "kda", "attention"}) {
    SCOPED_TRACE(mixer);
    testing::TempDir dir;
    Model original(tiny(mixer, mixer == "kda"));
    original.init_parameters(1);
    inference::export_hf(original, dir.path());
    Model imported(tiny(mixer, mixer == "kda"));
    imported.init_parameters(2);
    inference::import_hf(imported, dir.path());
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
  EXPECT_TRUE(throws_with<std::runtime_error>([&] { inference::import_hf(model, dir / "gdn"); },
                                              {"config.json", "unknown model_type \"mamba3\""}));
  inference::export_hf(model, dir / "cut");
  std::filesystem::resize_file(dir / "cut" / "model.safetensors",
                               std::filesystem::file_size(dir / "cut" / "model.safetensors") - 100);
  EXPECT_TRUE(throws_with<std::runtime_error>([&] { inference::import_hf(model, dir / "cut"); },
                                              {"cut/model.safetensors", "truncated"}));
}

TEST(HfCheckpoint, ModelsFlaCannotExpressAreRefusedBeforeWriting) {
  testing::TempDir dir;
  Model gla(tiny("gla", false));
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { inference::export_hf(gla, dir / "gla"); },
                                                 {"model.mixer", "'gla' has no fla name table"}));
  EXPECT_FALSE(std::filesystem::exists(dir / "gla"));
  ModelConfig narrow = tiny("attention", false);
  narrow.mixer_config<AttentionConfig>("attention").head_dim = 2;
  Model attention(narrow);
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { inference::export_hf(attention, dir / "a"); },
                                                 {"model.attention.head_dim", "hidden_size / num_heads"}));
  ModelConfig routed = tiny("gdn", false);
  routed.routing.kind = RoutingKind::clvr;
  EXPECT_TRUE(throws_with<std::invalid_argument>([&] { inference::hf_config(routed); },
                                                 {"model.routing", "no cross-layer routing", "clvr"}));
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

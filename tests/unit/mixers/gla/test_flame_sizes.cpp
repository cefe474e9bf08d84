// `linea params` of configs/models/{gla,retnet,hgrn,hgrn2,mamba2,rwkv6}-{340m,1.3b}.toml against the
// size of the same model in fla/flame (flame's configs where it has one: gla_340M, hgrn2_340M,
// mamba2_340M, mamba2_1B; else fla's model config at that width: GLAConfig, RetNetConfig,
// HGRNConfig, HGRN2Config, RWKV6Config), counted here from fla's module definitions
// (fla/models/*/modeling_*.py, fla/layers/*.py; reference/mixers.md §1.5–1.10, §4.1) with fla's own
// blocks: GatedMLP (hidden_ratio 4, RetNet's 2), RWKV-6's LayerNorms and channel mix
// (hidden_ratio 3.5), Mamba-2's in_proj and conv1d in one piece. linea's count must be within 5%.
// The table is printed, for docs/gla-family.md. GLA's and RetNet's optional short convs add exactly
// their filters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "data/config_reader.h"
#include "model/model_config.h"
#include "model/parameter_count.h"

namespace linea {
namespace {

constexpr int64_t kVocab = 32000;

// fla's GatedMLP width: 256 · ceil(int(d · ratio · 2/3) / 256).
int64_t gated_mlp_width(int64_t d, int64_t ratio) {
  const int64_t i = int64_t(double(d) * double(ratio) * 2.0 / 3.0);
  return 256 * ((i + 255) / 256);
}

// Untied embedding and LM head, the final RMSNorm; per block two RMSNorms and a GatedMLP.
int64_t fla_llama_stack(int64_t d, int64_t layers, int64_t mlp_ratio, int64_t mixer) {
  return 2 * kVocab * d + d + layers * (2 * d + 3 * d * gated_mlp_width(d, mlp_ratio) + mixer);
}

// GatedLinearAttention: q, k (d → d/2), v, g (d → d), gk_proj d → 16 → d/2 (+ bias), o_proj, and
// FusedRMSNormGated over head_v_dim.
int64_t fla_gla(int64_t d, int64_t layers, int64_t heads) {
  const int64_t key = d / 2, value = d;
  return fla_llama_stack(d, layers, 4,
                         2 * d * key + 2 * d * value + d * 16 + 16 * key + key + value * d + value / heads);
}

// MultiScaleRetention: q, k (d → d), v, g (d → 2d), o_proj, the norm over head_v_dim; MLP ratio 2.
int64_t fla_retnet(int64_t d, int64_t layers, int64_t heads) {
  const int64_t key = d, value = 2 * d;
  return fla_llama_stack(d, layers, 2, 2 * d * key + 2 * d * value + value * d + value / heads);
}

// HGRNAttention (expand_ratio 1) and HGRN2Attention (forget width d): four d × d projections and a
// norm of d; the model's lower_bounds [layers, d].
int64_t fla_hgrn(int64_t d, int64_t layers) { return fla_llama_stack(d, layers, 4, 4 * d * d + d) + layers * d; }

// Mamba2 (expand 2, head_dim 64, state 128, one group, conv 4 with bias): in_proj d → 2·d_in + 2N
// + H, conv1d over d_in + 2N, dt_bias, A_log, D, the gated norm over d_in, out_proj; per block one
// RMSNorm and no MLP.
int64_t fla_mamba2(int64_t d, int64_t layers) {
  const int64_t inner = 2 * d, heads = inner / 64, state = 128, conv = inner + 2 * state;
  const int64_t mixer = d * (inner + conv + heads) + conv * 4 + conv + 3 * heads + inner + inner * d;
  return 2 * kVocab * d + d + layers * (d + mixer);
}

// RWKV6Attention (4 heads, key d/2, value d, LoRA ranks 32 and 64): x_proj (μ, d → 160, 160 → d),
// x_bias [5, d], r, k (d → d/2), w (d → 64 → d/2 + bias), v, g (d → d), bonus, GroupNorm (weight and
// bias), o_proj; RWKV6FeedForward (hidden 3.5d rounded to 32: key d → I with μ, value I → d,
// receptance d → d with μ); LayerNorms with bias: two per block, a pre-norm in block 0, the final one.
int64_t fla_rwkv6(int64_t d, int64_t layers) {
  const int64_t key = d / 2, value = d, r = 32, w = 64;
  const int64_t attention = d + d * 5 * r + 5 * r * d + 5 * d + 2 * d * key + (d * w + w * key + key) + 2 * d * value +
                            key + 2 * value + value * d;
  const int64_t hidden = 32 * ((int64_t(3.5 * double(d)) + 31) / 32);
  const int64_t channel_mix = (d * hidden + d) + hidden * d + (d * d + d);
  return 2 * kVocab * d + 2 * d + 2 * d + layers * (4 * d + attention + channel_mix);
}

std::filesystem::path source_dir() {
  if (const char* dir = std::getenv("LINEA_SOURCE_DIR")) return dir;
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().parent_path().parent_path();
}

TEST(FlameSizes, EveryNewConfigIsWithinFivePercentOfFla) {
  struct Row {
    const char* config;
    int64_t fla;
    const char* source;
  };
  const Row rows[] = {
      {"gla-340m", fla_gla(1024, 24, 4), "flame gla_340M"},
      {"gla-1.3b", fla_gla(2048, 24, 4), "fla GLAConfig"},
      {"retnet-340m", fla_retnet(1024, 24, 8), "fla RetNetConfig at d 1024"},
      {"retnet-1.3b", fla_retnet(2048, 24, 8), "fla RetNetConfig"},
      {"hgrn-340m", fla_hgrn(1024, 24), "fla HGRNConfig at d 1024"},
      {"hgrn-1.3b", fla_hgrn(2048, 24), "fla HGRNConfig"},
      {"hgrn2-340m", fla_hgrn(1024, 24), "flame hgrn2_340M"},
      {"hgrn2-1.3b", fla_hgrn(2048, 24), "fla HGRN2Config"},
      {"mamba2-340m", fla_mamba2(1024, 48), "flame mamba2_340M"},
      {"mamba2-1.3b", fla_mamba2(2048, 48), "flame mamba2_1B"},
      {"rwkv6-340m", fla_rwkv6(1024, 24), "fla RWKV6Config at d 1024"},
      {"rwkv6-1.3b", fla_rwkv6(2048, 24), "fla RWKV6Config"},
  };
  std::printf("| config | linea params | fla | source | linea / fla |\n|---|---|---|---|---|\n");
  for (const Row& row : rows) {
    const std::filesystem::path path = source_dir() / "configs" / "models" / (std::string(row.config) + ".toml");
    ConfigReader reader = ConfigReader::from_file(path.string());
    const ModelConfig config = ModelConfig::parse(reader.section("model"));
    const int64_t ours = count_parameters(config).total;
    const double ratio = double(ours) / double(row.fla);
    std::printf("| %s | %lld | %lld | %s | %.4f |\n", row.config, static_cast<long long>(ours),
                static_cast<long long>(row.fla), row.source, ratio);
    EXPECT_NEAR(ratio, 1.0, 0.05) << row.config;
  }
}

// GLA's and RetNet's optional short convs (model.<mixer>.conv = W, fla's use_short_conv with
// conv_size W) add W filter taps per q, k and v channel and no bias, as fla's ShortConvolution.
TEST(FlameSizes, ShortConvsAddTheirFilters) {
  struct Row {
    const char* config;
    int64_t keys, values;  // H·K and H·V per layer
  };
  for (const Row& row : {Row{"gla-340m", 512, 1024}, Row{"retnet-340m", 1024, 2048}}) {
    SCOPED_TRACE(row.config);
    const std::string path = (source_dir() / "configs" / "models" / (std::string(row.config) + ".toml")).string();
    const std::string mixer = std::string(row.config).substr(0, std::string(row.config).find('-'));
    ConfigReader plain_reader = ConfigReader::from_file(path);
    ConfigReader conv_reader = ConfigReader::from_file(path, {"model." + mixer + ".conv=4"});
    const int64_t plain = count_parameters(ModelConfig::parse(plain_reader.section("model"))).total;
    const int64_t with_conv = count_parameters(ModelConfig::parse(conv_reader.section("model"))).total;
    EXPECT_EQ(with_conv - plain, 24 * 4 * (2 * row.keys + row.values));
  }
}

}  // namespace
}  // namespace linea

// bench_memory: the activation memory of one training micro-batch, measured on the CPU and
// projected to a bf16 step on one GPU.
//   bench_memory CONFIG.toml [--batch B] [--seq-len T] [--project TOKENS] [section.key=value ...]
// Measures, in f32 on B sequences of T tokens (default 2 × 256) of the config's model with its
// mixer in every layer (hybrid "pure") and the vocabulary capped at 1024 (the head's size does not
// change what a layer keeps):
//   - kept bytes per token per layer: the activations arena's high water with 2 layers minus that
//     with 1 (what forward keeps for backward), and the rest (embedding, final norm, loss);
//   - scratch bytes per token: the scratch arena's high water (one block's temporaries);
//   - by module: what each module of one block keeps and takes as temporaries in its forward,
//     run standalone (attn_norm, mixer, mlp_norm, mlp).
// Then projects the peak of a bf16 step of the full config (its layers and vocabulary) on TOKENS
// tokens per micro-batch (default B·T·64): parameters, gradients and AdamW state (f32 master,
// gradient, m and v; bf16 compute copy and gradients: 20 bytes per parameter), activations kept
// (the f32 figure halved, except what stays 4 bytes wide in bf16 steps: the decay gate's input,
// attention's log-sum-exp, the token ids, targets and positions), the scratch arena, and the
// delta rule's CUDA workspaces (model/mixers/delta_rule/cuda/delta_rule.cu, Plan: f32 decays, 4 value- and 10
// key-sized buffers, 2 chunk tiles and 2 chunk states per head, for backward); and a bound for the
// first micro-batch, whose arenas may hold up to 1/8 more than their high water (kernels/arena.h).
// Prints one JSON line.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "data/config_reader.h"
#include "model/mixers/attention/attention_layer.h"
#include "model/mixers/delta_rule/delta_rule_layer.h"
#include "model/model.h"
#include "model/parameter_count.h"
#include "model/rms_norm.h"
#include "model/swiglu_mlp.h"

namespace {

using namespace linea;

constexpr int64_t kMeasuredVocab = 1024;
constexpr double kGiB = double(1 << 30);

struct ModuleBytes {
  std::string name;
  size_t kept = 0, temporary = 0;
};

// Forward of one block's modules, standalone, on n tokens: the bytes each leaves in the
// activations arena (kept) and in the scratch arena (temporaries).
std::vector<ModuleBytes> block_modules(const ModelConfig& c, const SeqLayout& seqs) {
  ParameterSet params(DType::f32);
  RMSNorm attn_norm(params, "attn_norm", c.d_model, c.norm_eps);
  std::unique_ptr<Mixer> mixer;
  if (c.mixer == MixerKind::attention) {
    mixer = std::make_unique<AttentionLayer>(params, "mixer", c.d_model, c.attention);
  } else {
    mixer = std::make_unique<DeltaRuleLayer>(params, "mixer", c.d_model, c.mixer, c.linear, c.norm_eps);
  }
  RMSNorm mlp_norm(params, "mlp_norm", c.d_model, c.norm_eps);
  SwiGLUMLP mlp(params, "mlp", c.d_model, c.mlp_hidden);
  params.finalize();
  Rng rng(1);
  attn_norm.init();
  mixer->init(rng, c.init_std);
  mlp_norm.init();
  mlp.init(rng, c.init_std);

  Arena activations, scratch;
  StepContext ctx(activations, scratch, seqs, DType::f32);
  Tensor x = Tensor::empty({seqs.num_tokens(), c.d_model}, DType::f32);
  fill_normal(x, rng, 0.0, 1.0);
  std::vector<ModuleBytes> modules;
  const auto measure = [&](const std::string& name, const std::function<Tensor()>& forward) {
    const size_t kept = activations.used_bytes(), temporary = scratch.used_bytes();
    x = forward();
    modules.push_back({name, activations.used_bytes() - kept, scratch.used_bytes() - temporary});
  };
  measure("attn_norm", [&] { return attn_norm.forward(ctx, x); });
  measure("mixer", [&] { return mixer->forward(ctx, x); });
  measure("mlp_norm", [&] { return mlp_norm.forward(ctx, x); });
  measure("mlp", [&] { return mlp.forward(ctx, x); });
  return modules;
}

struct ArenaBytes {
  size_t kept = 0, scratch = 0;
};

ArenaBytes model_arenas(ModelConfig c, int64_t layers, const SeqLayout& seqs) {
  c.layers = layers;
  c.vocab = std::min(c.vocab, kMeasuredVocab);
  Model model(c, DType::f32);
  model.init_parameters(1);
  const bench::TokenBatch tokens = bench::random_token_batch(seqs.num_tokens(), c.vocab, 2);
  model.forward_backward(tokens.ids, tokens.targets, seqs, 1.0);
  return {model.saved_activation_bytes(), model.scratch_bytes()};
}

// Bytes of the delta rule's CUDA workspaces for backward on `tokens` tokens in chunks of 64.
double delta_rule_workspace_bytes(const ModelConfig& c, int64_t tokens) {
  if (!c.has_linear_layers()) return 0;
  const double chunk = 64, chunks = double(tokens) / chunk, heads = double(c.linear.heads);
  const double rows = double(tokens) * heads, keys = rows * double(c.linear.d_k), values = rows * double(c.linear.d_v);
  const double decays = c.mixer == MixerKind::gdn ? rows : c.mixer == MixerKind::deltanet ? 0 : keys;
  const double tiles = chunks * heads * chunk * chunk, states = chunks * heads * double(c.linear.d_k * c.linear.d_v);
  return 4.0 * (decays + 4 * values + 10 * keys + 2 * tiles + 2 * states);
}

int run(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help")) {
    std::fprintf(stderr,
                 "usage: bench_memory CONFIG.toml [--batch B] [--seq-len T] [--project TOKENS] [key=value ...]\n");
    return argc < 2 ? 2 : 0;
  }
  int64_t project = 0;
  const bench::ModelBenchArgs args = bench::parse_model_bench_args(
      argc, argv, 2, 256, 1,
      {{"project", [&](const std::string& v) { project = bench::parse_count("--project", v); }}});
  ConfigReader reader = ConfigReader::from_file(args.config, args.overrides);
  ModelConfig config = ModelConfig::parse(reader.section("model"));
  reader.check_unknown_keys({"model"});
  const int64_t full_layers = config.layers, full_vocab = config.vocab;
  config.hybrid = "pure";
  config.attention_layers.clear();
  config.resolve();

  const int64_t n = args.batch * args.seq_len;
  if (project == 0) project = n * 64;
  const SeqLayout seqs = SeqLayout::uniform(args.batch, args.seq_len);
  const ArenaBytes one = model_arenas(config, 1, seqs), two = model_arenas(config, 2, seqs);
  const double per_layer = double(two.kept - one.kept) / double(n);
  const double model_level = double(one.kept) / double(n) - per_layer;
  const double scratch = double(std::max(one.scratch, two.scratch)) / double(n);
  nlohmann::json modules = nlohmann::json::object();
  for (const ModuleBytes& m : block_modules(config, seqs)) {
    modules[m.name] = {{"kept_bytes_per_token", double(m.kept) / double(n)},
                       {"temporary_bytes_per_token", double(m.temporary) / double(n)}};
  }

  // bf16 projection: halve everything but what stays 4 bytes wide.
  const bool attention = config.mixer == MixerKind::attention;
  const double f32_wide_per_layer = attention                        ? double(config.attention.heads)
                                    : config.mixer == MixerKind::gdn ? double(config.linear.heads)
                                    : config.mixer == MixerKind::deltanet
                                        ? 0.0
                                        : double(config.linear.heads * config.linear.d_k);
  const double bf16_per_layer = per_layer / 2 + 2 * f32_wide_per_layer;
  const double bf16_model_level = model_level / 2 + 2 * 3;  // ids, targets, positions stay i32
  ModelConfig full = config;
  full.layers = full_layers;
  full.vocab = full_vocab;
  const double parameter_bytes = 20.0 * double(count_parameters(full).total);
  const double kept_bytes = double(project) * (bf16_per_layer * double(full_layers) + bf16_model_level);
  const double scratch_bytes = double(project) * scratch / 2;
  const double workspace_bytes = delta_rule_workspace_bytes(full, project);
  const double total_bytes = parameter_bytes + kept_bytes + scratch_bytes + workspace_bytes;
  bench::print_json_line({{"bench", "memory"},
                          {"config", args.config},
                          {"mixer", std::string(mixer_kind_name(config.mixer))},
                          {"measured_tokens", n},
                          {"f32_kept_bytes_per_token_per_layer", per_layer},
                          {"f32_kept_values_per_token_per_layer", per_layer / 4},
                          {"f32_kept_bytes_per_token_model", model_level},
                          {"f32_scratch_bytes_per_token", scratch},
                          {"modules", modules},
                          {"projected_tokens", project},
                          {"projected_layers", full_layers},
                          {"bf16_parameters_gib", parameter_bytes / kGiB},
                          {"bf16_kept_gib", kept_bytes / kGiB},
                          {"bf16_scratch_gib", scratch_bytes / kGiB},
                          {"delta_rule_workspace_gib", workspace_bytes / kGiB},
                          {"bf16_total_gib", total_bytes / kGiB},
                          {"bf16_first_step_at_most_gib", (total_bytes + (kept_bytes + scratch_bytes) / 8) / kGiB}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return linea::bench::main_reporting_errors("bench_memory", run, argc, argv); }

// bench_memory: the activation memory of one training micro-batch, measured on the CPU and
// projected to a bf16 step on one GPU.
//   bench_memory CONFIG.toml [--batch B] [--seq-len T] [--project TOKENS] [section.key=value ...]
// Measures, in f32 on B sequences of T tokens (default 2 × 256) of the config's model with its
// mixer in every layer (model.mixer, hybrid "pure"; for layer_mixers, layer 0's mixer) and the
// vocabulary capped at 1024 (the head's size does not
// change what a layer keeps):
//   - kept bytes per token per layer: the activations arena's high water with 2 layers minus that
//     with 1 (what forward keeps for backward), and the rest (embedding, final norm, loss);
//   - scratch bytes per token: the scratch arena's high water (one block's temporaries);
//   - by module: what each module of one block keeps and takes as temporaries in its forward,
//     run standalone (attn_norm, mixer, mlp_norm, mlp).
// Then projects the peak of a bf16 step of the full config (its layers and vocabulary) on TOKENS
// tokens per micro-batch (default B·T·64): parameters, gradients and AdamW state (f32 master,
// gradient, m and v; bf16 compute copy and gradients: 20 bytes per parameter), activations kept
// (the f32 figure halved, except what stays 4 bytes wide in bf16 steps: the mixer's, e.g. the decay
// gate's input or attention's log-sum-exp (MixerFamily::wide_values_per_token), the token ids,
// targets and positions; plus what only the CUDA forward keeps, MixerFamily::cuda_saved_bytes, e.g.
// the delta rule's chunk intermediates unless recompute), the scratch arena, and the mixer's CUDA workspaces for
// backward (MixerFamily::cuda_workspace_bytes, e.g. the delta rule's); and a bound for the first micro-batch, whose
// arenas may hold up to 1/8 more than their high water (kernels/arena.h). Prints one JSON line.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "data/config_reader.h"
#include "model/mixer_registry.h"
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
  const std::unique_ptr<Mixer> mixer =
      mixer_family(c.layer_mixers.front())
          .make_layer(params, "mixer", c.d_model, c.norm_eps, c.layer_config(0), {}, {0, c.layers});
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
  const std::string measured = config.layer_mixers_terms.empty() ? config.mixer : config.layer_mixers.front();
  config.hybrid = "pure";
  config.attention_layers.clear();
  config.layer_mixers_terms = {measured};
  config.layer_mixers_repeat = true;
  config.resolve();
  const MixerFamily& family = mixer_family(measured);
  const MixerConfig& mixer_config = config.layer_config(0);

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
  const double f32_wide_per_layer = family.wide_values_per_token(mixer_config);
  const double bf16_per_layer = per_layer / 2 + 2 * f32_wide_per_layer;
  const double bf16_model_level = model_level / 2 + 2 * 3;  // ids, targets, positions stay i32
  ModelConfig full = config;
  full.layers = full_layers;
  full.vocab = full_vocab;
  const double parameter_bytes = 20.0 * double(count_parameters(full).total);
  const double saved_bytes = family.cuda_saved_bytes(mixer_config, project) * double(full_layers);
  const double kept_bytes = double(project) * (bf16_per_layer * double(full_layers) + bf16_model_level) + saved_bytes;
  const double scratch_bytes = double(project) * scratch / 2;
  const double workspace_bytes = family.cuda_workspace_bytes(mixer_config, project);
  const double total_bytes = parameter_bytes + kept_bytes + scratch_bytes + workspace_bytes;
  bench::print_json_line({{"bench", "memory"},
                          {"config", args.config},
                          {"mixer", measured},
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
                          {"cuda_saved_gib", saved_bytes / kGiB},
                          {"bf16_scratch_gib", scratch_bytes / kGiB},
                          {"delta_rule_workspace_gib", workspace_bytes / kGiB},
                          {"bf16_total_gib", total_bytes / kGiB},
                          {"bf16_first_step_at_most_gib", (total_bytes + (kept_bytes + scratch_bytes) / 8) / kGiB}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return linea::bench::main_reporting_errors("bench_memory", run, argc, argv); }

// bench_model: time Model::forward_backward (one micro-batch, f32, on the CPU) for a model config.
//   bench_model CONFIG.toml [--batch B] [--seq-len T] [--steps S] [section.key=value ...]
// Prints one JSON line per config: tokens per step, mean step time over S steps after one warm-up
// step, tokens/s, the loss of the last step and the activation memory high-water mark.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "data/config_reader.h"
#include "model/model.h"

namespace {

int run(int argc, char** argv) {
  using namespace linea;
  if (argc < 2 || !std::strcmp(argv[1], "--help")) {
    std::fprintf(stderr, "usage: bench_model CONFIG.toml [--batch B] [--seq-len T] [--steps S] [key=value ...]\n");
    return argc < 2 ? 2 : 0;
  }
  const bench::ModelBenchArgs args = bench::parse_model_bench_args(argc, argv, 4, 256, 3);
  const int64_t batch = args.batch, seq_len = args.seq_len, steps = args.steps;
  ConfigReader reader = ConfigReader::from_file(args.config, args.overrides);
  const ModelConfig config = ModelConfig::parse(reader.section("model"));
  reader.check_unknown_keys({"model"});
  Model model(config, DType::f32);
  model.init_parameters(1);

  const int64_t n = batch * seq_len;
  const SeqLayout seqs = SeqLayout::uniform(batch, seq_len);
  const bench::TokenBatch tokens = bench::random_token_batch(n, config.vocab, 2);
  const Tensor &ids = tokens.ids, &targets = tokens.targets;

  double loss = model.forward_backward(ids, targets, seqs, 1.0);  // warm-up: sizes the arenas
  const auto start = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < steps; ++s) loss = model.forward_backward(ids, targets, seqs, 1.0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
  std::printf(
      "{\"bench\": \"model_forward_backward\", \"config\": \"%s\", \"params\": %lld, \"batch\": %lld, "
      "\"seq_len\": %lld, \"step_ms\": %.2f, \"tokens_per_s\": %.1f, \"loss\": %.4f, \"activation_mib\": %.1f}\n",
      argv[1], static_cast<long long>(model.params().numel()), static_cast<long long>(batch),
      static_cast<long long>(seq_len), seconds * 1e3, double(n) / seconds, loss, model.activation_bytes() / 1048576.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return linea::bench::main_reporting_errors("bench_model", run, argc, argv); }

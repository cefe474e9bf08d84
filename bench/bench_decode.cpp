// bench_decode: a prefill through inference::Decoder against one forward of the same tokens, on the
// CPU (f32), for a model config; the CPU counterpart of bench/cuda/bench_gpu_decode.cpp. Random
// weights (the config's init_std, seed 1), B prompts of T random token ids. Timed, each the best of
// R runs after a warm-up run, in wall time (`_ms`) and in the process's CPU time over all threads
// (`_cpu_ms`, steadier than wall time on a shared machine; with OMP_NUM_THREADS=1 it is the work):
//   forward: Model::logits over the B packed prompts at their last rows (one forward: what a
//            prefill from empty states equals, and what it should cost);
//   evaluate: Model::evaluate of the same tokens (the training forward and every row's loss);
//   prefill: Decoder::prefill of the same prompts on a fresh decoder (its construction, the zero
//            states, not timed);
//   decode: S steps of one random token per sequence after a prefill (ms per step).
// One JSON line: the times, tokens/s of forward and prefill, and prefill / forward.
//
// Usage: bench_decode CONFIG.toml [--batch B=4] [--seq-len T=512] [--steps S=16] [--repeats R=3]
//        [section.key=value ...]
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "data/config_reader.h"
#include "inference/decoder.h"
#include "model/model.h"

namespace {

using namespace linea;

int run(int argc, char** argv) {
  int64_t repeats = 3;
  const bench::ModelBenchArgs args = bench::parse_model_bench_args(
      argc, argv, 4, 512, 16,
      {{"repeats", [&](const std::string& v) { repeats = bench::parse_count("--repeats", v); }}});
  ConfigReader reader = ConfigReader::from_file(args.config, args.overrides);
  const ModelConfig config = ModelConfig::parse(reader.section("model"));
  Model model(config, DType::f32);
  model.init_parameters(1);
  const int64_t B = args.batch, T = args.seq_len, steps = args.steps;

  const bench::TokenBatch tokens = bench::random_token_batch(B * T, config.vocab, 2);
  const int32_t* id = tokens.ids.data<int32_t>();
  std::vector<inference::TokenIds> prompts(static_cast<size_t>(B));
  std::vector<int64_t> last_rows;
  for (int64_t s = 0; s < B; ++s) {
    prompts[s].assign(id + s * T, id + (s + 1) * T);
    last_rows.push_back((s + 1) * T - 1);
  }
  const SeqLayout seqs = SeqLayout::uniform(B, T);

  using bench::Best, bench::best_of;
  const Best forward = best_of(repeats, [&] { model.logits(tokens.ids, seqs, last_rows); });
  const Best evaluate = best_of(repeats, [&] { model.evaluate(tokens.ids, tokens.targets, seqs); });
  std::unique_ptr<inference::Decoder> decoder;
  const Best prefill = best_of(
      repeats, [&] { decoder->prefill(prompts); }, [&] { decoder = std::make_unique<inference::Decoder>(model, B); });
  Rng rng(3);
  std::vector<inference::TokenIds> step_tokens(static_cast<size_t>(steps), inference::TokenIds(static_cast<size_t>(B)));
  for (auto& step : step_tokens) {
    for (int32_t& t : step) t = static_cast<int32_t>(rng.next_u64() % uint64_t(config.vocab));
  }
  const Best decode = best_of(
      repeats,
      [&] {
        for (const auto& step : step_tokens) decoder->step(step);
      },
      [&] {
        decoder = std::make_unique<inference::Decoder>(model, B);
        decoder->prefill(prompts);
      });

  const double n = double(B * T);
  bench::print_json_line({{"bench", "decode"},
                          {"config", args.config},
                          {"params", model.params().numel()},
                          {"batch", B},
                          {"prompt", T},
                          {"steps", steps},
                          {"forward_ms", forward.wall_ms},
                          {"forward_cpu_ms", forward.cpu_ms},
                          {"forward_tokens_per_s", n / (forward.wall_ms / 1e3)},
                          {"evaluate_ms", evaluate.wall_ms},
                          {"evaluate_cpu_ms", evaluate.cpu_ms},
                          {"prefill_ms", prefill.wall_ms},
                          {"prefill_cpu_ms", prefill.cpu_ms},
                          {"prefill_tokens_per_s", n / (prefill.wall_ms / 1e3)},
                          {"prefill_over_forward", prefill.wall_ms / forward.wall_ms},
                          {"prefill_over_forward_cpu", prefill.cpu_ms / forward.cpu_ms},
                          {"decode_ms_per_step", decode.wall_ms / double(steps)},
                          {"decode_cpu_ms_per_step", decode.cpu_ms / double(steps)}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return linea::bench::main_reporting_errors("bench_decode", run, argc, argv); }

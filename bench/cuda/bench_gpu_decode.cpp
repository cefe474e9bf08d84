// bench_gpu_decode: decoding throughput of a model config on one GPU (issue 18). Random weights
// (the config's init_std, seed 1), B prompts of T random token ids prefilled at once through
// inference::Decoder (the chunked ops from empty states, one block's activations at a time), then S
// decoding steps of one random token per sequence (the one-token kernels over the layers' states;
// each step brings its logits back to the host, as generation needs them). A first prefill and S
// steps on another decoder warm up (arenas, cuBLAS plans, cuDNN graphs) and are not timed. CUDA
// events time the prefill and the S steps. One JSON line per batch size:
//   prefill_ms, prefill_tokens_per_s = B·T / prefill time,
//   decode_ms_per_step, decode_tokens_per_s = B / step time,
//   state_bytes_per_sequence after the prompt and after the steps (what the states hold: recurrent
//   states in f32, conv and shift inputs and KV caches in the compute dtype; a KV cache's live rows),
//   peak_device_mib (all CUDA memory held at once during the batch: weights, arenas, states).
//
// Usage: bench_gpu_decode CONFIG.toml [--batches 1,64] [--seq-len T=4096] [--steps S=64]
//        [--dtype bf16|f32] [section.key=value ...]
//        bench_gpu_decode   (from the repository root: issue 18's table, configs/bench/gdn-340m-4k.toml
//                            and transformer-340m-4k.toml at batch 1 and 64, prompt 4096, bf16)
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/cuda/gpu_bench.h"
#include "data/config_reader.h"
#include "inference/decoder.h"
#include "kernels/device_memory.h"
#include "model/model.h"

namespace {

using namespace linea;

std::vector<int64_t> parse_batches(const std::string& list) {
  std::vector<int64_t> batches;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) batches.push_back(bench::parse_count("--batches", item));
  if (batches.empty()) throw std::invalid_argument("--batches: expected a list such as 1,64, got '" + list + "'");
  return batches;
}

// Milliseconds between two events recorded around fn, on the default stream.
double event_ms(const std::function<void()>& fn) {
  cudaEvent_t start, stop;
  bench::check(cudaEventCreate(&start), "cudaEventCreate");
  bench::check(cudaEventCreate(&stop), "cudaEventCreate");
  bench::check(cudaEventRecord(start), "cudaEventRecord");
  fn();
  bench::check(cudaEventRecord(stop), "cudaEventRecord");
  bench::check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  bench::check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms;
}

struct Timing {
  double prefill_ms = 0, steps_ms = 0;
  size_t bytes_after_prompt = 0, bytes_after_steps = 0;
};

// One prefill of `prompts` and `steps` steps on a fresh decoder.
Timing decode(Model& model, const std::vector<inference::TokenIds>& prompts, int64_t steps, Rng& rng) {
  const int64_t batch = static_cast<int64_t>(prompts.size()), vocab = model.config().vocab;
  inference::Decoder decoder(model, batch);
  Timing t;
  t.prefill_ms = event_ms([&] { decoder.prefill(prompts); });
  t.bytes_after_prompt = decoder.state_bytes();
  std::vector<inference::TokenIds> tokens(static_cast<size_t>(steps));
  for (auto& step : tokens) {
    for (int64_t s = 0; s < batch; ++s) step.push_back(static_cast<int32_t>(rng.next_u64() % uint64_t(vocab)));
  }
  t.steps_ms = event_ms([&] {
    for (const inference::TokenIds& step : tokens) decoder.step(step);
  });
  t.bytes_after_steps = decoder.state_bytes();
  return t;
}

struct Options {
  std::vector<int64_t> batches = {1, 64};
  int64_t prompt = 4096, steps = 64;
  DType dtype = DType::bf16;
};

// One JSON line per batch size of `options` for the model of `config_path`.
void bench_config(const std::string& config_path, const std::vector<std::string>& overrides, const Options& options) {
  ConfigReader reader = ConfigReader::from_file(config_path, overrides);
  const ModelConfig config = ModelConfig::parse(reader.section("model"));
  Model model(config, DType::f32, true, {}, Device::cuda, options.dtype);
  model.init_parameters(1);
  const int64_t T = options.prompt, steps = options.steps;
  for (int64_t B : options.batches) {
    Rng rng(static_cast<uint64_t>(B));
    std::vector<inference::TokenIds> prompts(static_cast<size_t>(B));
    for (auto& prompt : prompts) {
      for (int64_t i = 0; i < T; ++i) prompt.push_back(static_cast<int32_t>(rng.next_u64() % uint64_t(config.vocab)));
    }
    cuda_reset_peak_allocated_bytes();
    decode(model, prompts, steps, rng);  // warm-up
    const Timing t = decode(model, prompts, steps, rng);
    const double step_ms = t.steps_ms / double(steps);
    bench::emit({{"bench", "gpu_decode"},
                 {"config", config_path},
                 {"dtype", std::string(dtype_name(options.dtype))},
                 {"params", model.params().numel()},
                 {"batch", B},
                 {"prompt", T},
                 {"steps", steps},
                 {"prefill_ms", t.prefill_ms},
                 {"prefill_tokens_per_s", double(B * T) / (t.prefill_ms / 1e3)},
                 {"decode_ms_per_step", step_ms},
                 {"decode_tokens_per_s", double(B) / (step_ms / 1e3)},
                 {"state_bytes_per_sequence_after_prompt", t.bytes_after_prompt / static_cast<size_t>(B)},
                 {"state_bytes_per_sequence_after_steps", t.bytes_after_steps / static_cast<size_t>(B)},
                 {"peak_device_mib", double(cuda_peak_allocated_bytes()) / double(1 << 20)}});
  }
}

int run(int argc, char** argv) {
  Options options;
  if (argc < 2) {  // issue 18's table
    bench::emit_device();
    for (const char* config : {"configs/bench/gdn-340m-4k.toml", "configs/bench/transformer-340m-4k.toml"}) {
      bench_config(config, {}, options);
    }
    return 0;
  }
  const bench::ModelBenchArgs args =
      bench::parse_model_bench_args(argc, argv, 0, options.prompt, options.steps,
                                    {{"batches", [&](const std::string& v) { options.batches = parse_batches(v); }},
                                     {"dtype", [&](const std::string& v) {
                                        if (v != "bf16" && v != "f32")
                                          throw std::invalid_argument("--dtype: expected bf16 or f32, got '" + v + "'");
                                        options.dtype = v == "bf16" ? DType::bf16 : DType::f32;
                                      }}});
  if (args.batch != 0) throw std::invalid_argument("--batch: give the batch sizes as --batches B1,B2,...");
  options.prompt = args.seq_len;
  options.steps = args.steps;
  bench::emit_device();
  bench_config(args.config, args.overrides, options);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return linea::bench::main_reporting_errors("bench_gpu_decode", run, argc, argv); }

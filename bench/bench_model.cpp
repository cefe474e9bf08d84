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

#include "data/config_reader.h"
#include "kernels/random.h"
#include "worker/model.h"

namespace {

int64_t parse_count(const char* flag, const char* value) {
  char* end = nullptr;
  const long long v = std::strtoll(value, &end, 10);
  if (!*value || *end || v < 1) {
    std::fprintf(stderr, "bench_model: %s expects a positive integer, got '%s'\n", flag, value);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace linea;
  if (argc < 2 || !std::strcmp(argv[1], "--help")) {
    std::fprintf(stderr, "usage: bench_model CONFIG.toml [--batch B] [--seq-len T] [--steps S] [key=value ...]\n");
    return argc < 2 ? 2 : 0;
  }
  int64_t batch = 4, seq_len = 256, steps = 3;
  std::vector<std::string> overrides;
  for (int i = 2; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--batch") && has_value) {
      batch = parse_count(argv[i], argv[i + 1]), ++i;
    } else if (!std::strcmp(argv[i], "--seq-len") && has_value) {
      seq_len = parse_count(argv[i], argv[i + 1]), ++i;
    } else if (!std::strcmp(argv[i], "--steps") && has_value) {
      steps = parse_count(argv[i], argv[i + 1]), ++i;
    } else {
      overrides.emplace_back(argv[i]);
    }
  }
  try {
    ConfigReader reader = ConfigReader::from_file(argv[1], overrides);
    const ModelConfig config = ModelConfig::parse(reader.section("model"));
    reader.check_unknown_keys({"model"});
    Model model(config, DType::f32);
    model.init_parameters(1);

    const int64_t n = batch * seq_len;
    const SeqLayout seqs = SeqLayout::uniform(batch, seq_len);
    Tensor ids = Tensor::empty({n}, DType::i32), targets = Tensor::empty({n}, DType::i32);
    Rng rng(2);
    for (int64_t i = 0; i < n; ++i) ids.data<int32_t>()[i] = static_cast<int32_t>(rng.next_u64() % config.vocab);
    for (int64_t i = 0; i < n; ++i) targets.data<int32_t>()[i] = i + 1 < n ? ids.data<int32_t>()[i + 1] : -1;

    double loss = model.forward_backward(ids, targets, seqs, 1.0);  // warm-up: sizes the arenas
    const auto start = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < steps; ++s) loss = model.forward_backward(ids, targets, seqs, 1.0);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
    std::printf(
        "{\"bench\": \"model_forward_backward\", \"config\": \"%s\", \"params\": %lld, \"batch\": %lld, "
        "\"seq_len\": %lld, \"step_ms\": %.2f, \"tokens_per_s\": %.1f, \"loss\": %.4f, \"activation_mib\": %.1f}\n",
        argv[1], static_cast<long long>(model.params().numel()), static_cast<long long>(batch),
        static_cast<long long>(seq_len), seconds * 1e3, double(n) / seconds, loss,
        model.activation_bytes() / 1048576.0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_model: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

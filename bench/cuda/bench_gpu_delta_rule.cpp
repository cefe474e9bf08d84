// bench_gpu_delta_rule: times the CUDA delta rule (model/mixers/delta_rule/cuda/delta_rule.h) at the shapes of
// shared/ANCHORS.md (B·T = 32768 tokens, H = 16, K = V = 128; T = 4096, 16384, 32768 with B = 8, 2,
// 1) and at the 340M model's heads (B·T = 32768, H = 4, K = 256, V = 512), bf16 operands and f32
// gates, for DeltaNet, GDN, KDA and GDN-2: one JSON line per (shape, mixer, T) with the forward and
// forward+backward milliseconds (CUDA events, mean over the timed launches; the backward recomputing
// the forward's intermediates, and, as fwd_saving_ms and fwd_bwd_saved_ms, with the forward saving
// them for the backward: ops::delta_rule_saved_bytes, saved_gib), fla's figures and
// linea's target from ANCHORS.md where it gives them, and the effective TFLOP/s at
// reference/mixers.md §2.7's dense counts (forward 6KV + 6CK + 4CV + C²/3, backward
// 16KV + 18CK + 10CV + 4C² FLOPs per token and head, C = 64).
//
// Usage: bench_gpu_delta_rule [iterations=10] [mixer (deltanet|gdn|kda|gdn2; default: all)]
//        [T (4096|16384|32768; default: all)] [shape (anchors|340m; default: both)]
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "bench/cuda/gpu_bench.h"
#include "kernels/random.h"
#include "model/mixers/delta_rule/delta_rule.h"
#include "model/mixers/delta_rule/delta_rule_config.h"

namespace {

using namespace linea;
using namespace linea::bench;

struct Reference {  // ANCHORS.md: fla's fwd and fwd+bwd ms, linea's fwd+bwd target (ms)
  std::optional<double> fla_fwd, fla_fwd_bwd, target_fwd_bwd;
};

Reference anchors(const std::string& shape, const std::string& mixer, int64_t T) {
  if (shape != "anchors") return {};
  if (mixer == "deltanet" && T == 4096) return {1.00, 2.83, 1.9};
  if (mixer == "gdn" && T == 4096) return {0.84, 3.31, 2.2};
  if (mixer == "gdn" && T == 16384) return {1.04, 4.11, 2.4};
  if (mixer == "gdn" && T == 32768) return {1.45, 5.80, 2.5};
  if (mixer == "kda" && T == 4096) return {1.82, 9.71, 4.9};
  return {};
}

nlohmann::json optional_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

constexpr int64_t kTokens = 32768, kChunk = 64;

struct HeadShape {
  const char* name;
  int64_t heads, key_dim, value_dim;
};

// Every operand any mixer takes, on the device, filled once per head shape (all shapes have
// B·T = kTokens): q, k with rows of norm ≈ 1 like L2-normalised ones, v and d_o in [−1, 1), gates
// in [0.1, 0.9), log decays in [−0.2, −0.001).
struct Operands {
  HeadShape shape;
  Tensor q, k, v, beta, b, w, g_scalar, g_channel, d_o;
  Operands(const HeadShape& head_shape, Rng& rng) : shape(head_shape) {
    const int64_t N = kTokens, H = shape.heads, K = shape.key_dim, V = shape.value_dim;
    const DType dt = DType::bf16;
    const double edge = std::sqrt(3.0 / static_cast<double>(K));
    q = random_device({N, H, K}, dt, rng, -edge, edge);
    k = random_device({N, H, K}, dt, rng, -edge, edge);
    v = random_device({N, H, V}, dt, rng);
    beta = random_device({N, H}, dt, rng, 0.1, 0.9);
    b = random_device({N, H, K}, dt, rng, 0.1, 0.9);
    w = random_device({N, H, V}, dt, rng, 0.1, 0.9);
    g_scalar = random_device({N, H}, DType::f32, rng, -0.2, -0.001);
    g_channel = random_device({N, H, K}, DType::f32, rng, -0.2, -0.001);
    d_o = random_device({N, H, V}, dt, rng);
  }
};

void bench_mixer(const DeltaRulePreset& m, int64_t batch, int iterations, const Operands& x) {
  const int64_t T = kTokens / batch, N = kTokens, H = x.shape.heads, K = x.shape.key_dim, V = x.shape.value_dim,
                C = kChunk;
  const ops::DeltaRuleSpec spec{m.decay, m.gate, 1 / std::sqrt(static_cast<double>(K))};
  const SeqLayout seqs = SeqLayout::uniform(batch, T);
  ops::DeltaRuleInputs in;
  in.q = x.q, in.k = x.k, in.v = x.v;
  if (m.gate == ops::GateKind::beta) {
    in.beta = x.beta;
  } else {
    in.b = x.b, in.w = x.w;
  }
  if (m.decay == ops::DecayKind::scalar) in.g = x.g_scalar;
  if (m.decay == ops::DecayKind::channel) in.g = x.g_channel;
  Tensor o = Tensor::empty({N, H, V}, DType::bf16, Device::cuda);
  auto empty_like = [](const Tensor& t) {
    return t.defined() ? Tensor::empty(t.shape(), t.dtype(), Device::cuda) : Tensor();
  };
  ops::DeltaRuleGrads grads{empty_like(in.q), empty_like(in.k), empty_like(in.v), empty_like(in.beta),
                            empty_like(in.b), empty_like(in.w), empty_like(in.g), Tensor()};

  // Both ways of training: the backward recomputing the forward's intermediates (saved undefined),
  // and the backward from what the forward saved (the layers' default, [model.linear] recompute).
  const size_t saved_bytes = ops::delta_rule_saved_bytes(spec, seqs, in);
  const Tensor saved_buffer =
      saved_bytes ? Tensor::empty({static_cast<int64_t>((saved_bytes + 1) / 2)}, DType::bf16, Device::cuda) : Tensor();
  const auto forward = [&](const Tensor& saved) {
    ops::delta_rule_forward(ops::DeltaRuleImpl::chunked, spec, seqs, in, o, Tensor(), Tensor(), saved);
  };
  const auto forward_backward = [&](const Tensor& saved) {
    forward(saved);
    ops::delta_rule_backward(ops::DeltaRuleImpl::chunked, spec, seqs, in, x.d_o, Tensor(), grads, Tensor(), saved);
  };
  const double fwd_ms = mean_ms(iterations, [&] { forward(Tensor()); });
  const double fwd_bwd_ms = mean_ms(iterations, [&] { forward_backward(Tensor()); });
  const double fwd_saving_ms = mean_ms(iterations, [&] { forward(saved_buffer); });
  const double fwd_bwd_saved_ms = mean_ms(iterations, [&] { forward_backward(saved_buffer); });

  const double per_token_fwd = 6.0 * K * V + 6.0 * C * K + 4.0 * C * V + C * C / 3.0;
  const double per_token_bwd = 16.0 * K * V + 18.0 * C * K + 10.0 * C * V + 4.0 * C * C;
  const double work = static_cast<double>(N * H);
  const Reference ref = anchors(x.shape.name, m.name, T);
  emit({{"op", std::string("delta_rule_") + m.name},
        {"shape", x.shape.name},
        {"dtype", "bf16"},
        {"B", batch},
        {"T", T},
        {"H", H},
        {"K", K},
        {"V", V},
        {"fwd_ms", fwd_ms},
        {"fwd_bwd_ms", fwd_bwd_ms},
        {"fwd_saving_ms", fwd_saving_ms},
        {"fwd_bwd_saved_ms", fwd_bwd_saved_ms},
        {"saved_gib", static_cast<double>(saved_bytes) / (1 << 30)},
        {"fwd_tflops", tflops(per_token_fwd * work, fwd_ms)},
        {"fwd_bwd_tflops", tflops((per_token_fwd + per_token_bwd) * work, fwd_bwd_ms)},
        {"fla_fwd_ms", optional_json(ref.fla_fwd)},
        {"fla_fwd_bwd_ms", optional_json(ref.fla_fwd_bwd)},
        {"target_fwd_bwd_ms", optional_json(ref.target_fwd_bwd)}});
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = static_cast<int>(positive_arg("bench_gpu_delta_rule", argc, argv, 1, 10));
  const std::string only_mixer = argc > 2 ? argv[2] : "";
  const int64_t only_T = positive_arg("bench_gpu_delta_rule", argc, argv, 3, 0);
  const std::string only_shape = argc > 4 ? argv[4] : "";
  emit_device();
  Rng rng(2026);
  const HeadShape shapes[] = {{"anchors", 16, 128, 128}, {"340m", 4, 256, 512}};
  bool known = only_mixer.empty();
  for (const DeltaRulePreset& m : delta_rule_presets()) known = known || only_mixer == m.name;
  if (!known)
    throw std::invalid_argument("bench_gpu_delta_rule: unknown mixer '" + only_mixer +
                                "' (expected deltanet, gdn, kda or gdn2)");
  bool known_shape = only_shape.empty();
  for (const HeadShape& shape : shapes) {
    if (!only_shape.empty() && only_shape != shape.name) continue;
    known_shape = true;
    const Operands operands(shape, rng);
    for (const DeltaRulePreset& m : delta_rule_presets()) {
      if (!only_mixer.empty() && only_mixer != m.name) continue;
      for (const int64_t batch : {8, 2, 1}) {
        if (only_T == 0 || only_T == kTokens / batch) bench_mixer(m, batch, iterations, operands);
      }
    }
  }
  if (!known_shape)
    throw std::invalid_argument("bench_gpu_delta_rule: unknown shape '" + only_shape + "' (expected anchors or 340m)");
  return 0;
}

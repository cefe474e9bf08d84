// bench_gpu_gla: times the CUDA gated-linear-attention family (model/mixers/gla/cuda/gla.h) and
// HGRN's scan (model/mixers/hgrn/cuda/hgrn.h) at B·T = 32768 tokens, H = 16, K = V = 128, T = 4096
// and 16384 (B = 8, 2), bf16 token operands and f32 gates: one JSON line per (op, T) with the
// forward and forward+backward milliseconds (CUDA events, mean over the timed launches; the
// backward recomputing the forward's intermediates, and, as fwd_saving_ms and fwd_bwd_saved_ms,
// with the forward saving them for the backward: ops::gla_saved_bytes, saved_gib; null for the ops
// that save nothing: hgrn). Ops: gla (a decay per channel), mamba2 (one per token and head), retnet
// (fixed per head), rwkv6 (per channel, the bonus readout), hgrn2 (the key tied to the decay), and
// hgrn over D = H·K = 2048 channels. Every op but hgrn takes the delta rule's bf16 tensor-core
// pipeline at these shapes (model/mixers/gla/cuda/gla.cu: plain_takes), rwkv6 as its plain write
// with the bonus readout.
//
// Usage: bench_gpu_gla [iterations=10] [op (gla|retnet|hgrn2|mamba2|rwkv6|hgrn; default: all)]
//        [T (4096|16384; default: both)]
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "bench/cuda/gpu_bench.h"
#include "kernels/random.h"
#include "model/mixers/gla/gla.h"
#include "model/mixers/gla/presets.h"
#include "model/mixers/hgrn/hgrn.h"

namespace {

using namespace linea;
using namespace linea::bench;

constexpr int64_t kTokens = 32768, kHeads = 16, kKey = 128, kValue = 128;

// Every operand any op takes, on the device: q, k, v, d_o in [−1, 1) (q, k scaled to rows of norm
// ≈ 1), log decays in [−0.2, −0.001), u in [−1, 1).
struct Operands {
  Tensor q, k, v, g_channel, g_scalar, g_head, u, d_o;
  explicit Operands(Rng& rng) {
    const int64_t N = kTokens, H = kHeads, K = kKey, V = kValue;
    const double edge = std::sqrt(3.0 / static_cast<double>(K));
    q = random_device({N, H, K}, DType::bf16, rng, -edge, edge);
    k = random_device({N, H, K}, DType::bf16, rng, -edge, edge);
    v = random_device({N, H, V}, DType::bf16, rng);
    g_channel = random_device({N, H, K}, DType::f32, rng, -0.2, -0.001);
    g_scalar = random_device({N, H}, DType::f32, rng, -0.2, -0.001);
    g_head = random_device({H}, DType::f32, rng, -0.2, -0.001);
    u = random_device({H, K}, DType::f32, rng);
    d_o = random_device({N, H, V}, DType::bf16, rng);
  }
};

Tensor empty_like(const Tensor& t) {
  return t.defined() ? Tensor::empty(t.shape(), t.dtype(), Device::cuda) : Tensor();
}

// The timings with the forward saving its intermediates for the backward, where the op saves any.
struct SavedTimes {
  size_t bytes = 0;
  double fwd_ms = 0, fwd_bwd_ms = 0;
};

void report(const std::string& op, int64_t batch, double fwd_ms, double fwd_bwd_ms, const SavedTimes& saved = {}) {
  const auto when_saved = [&](double ms) { return saved.bytes ? nlohmann::json(ms) : nlohmann::json(nullptr); };
  emit({{"op", op},
        {"dtype", "bf16"},
        {"B", batch},
        {"T", kTokens / batch},
        {"H", kHeads},
        {"K", kKey},
        {"V", kValue},
        {"fwd_ms", fwd_ms},
        {"fwd_bwd_ms", fwd_bwd_ms},
        {"fwd_saving_ms", when_saved(saved.fwd_ms)},
        {"fwd_bwd_saved_ms", when_saved(saved.fwd_bwd_ms)},
        {"saved_gib", static_cast<double>(saved.bytes) / (1 << 30)}});
}

void bench_gla(ops::GlaMixer mixer, int64_t batch, int iterations, const Operands& x) {
  const ops::GlaSpec spec = ops::gla_mixer_spec(mixer, kKey);
  const SeqLayout seqs = SeqLayout::uniform(batch, kTokens / batch);
  ops::GlaInputs in;
  in.q = x.q, in.v = x.v;
  if (spec.key == ops::GlaKey::given) in.k = x.k;
  in.g = spec.decay == ops::GlaDecay::channel  ? x.g_channel
         : spec.decay == ops::GlaDecay::scalar ? x.g_scalar
                                               : x.g_head;
  if (spec.readout == ops::GlaReadout::before_write_bonus) in.u = x.u;
  Tensor o = Tensor::empty({kTokens, kHeads, kValue}, DType::bf16, Device::cuda);
  ops::GlaGrads grads{empty_like(in.q), empty_like(in.k),
                      empty_like(in.v), spec.decay == ops::GlaDecay::head ? Tensor() : empty_like(in.g),
                      empty_like(in.u), Tensor()};
  // Both ways of training: the backward recomputing the forward's intermediates (saved undefined),
  // and the backward from what the forward saved (the layers' default, [model.<mixer>] recompute).
  SavedTimes saving;
  saving.bytes = ops::gla_saved_bytes(spec, seqs, in);
  const Tensor saved_buffer =
      saving.bytes ? Tensor::empty({static_cast<int64_t>((saving.bytes + 1) / 2)}, DType::bf16, Device::cuda)
                   : Tensor();
  const auto forward = [&](const Tensor& saved) {
    ops::gla_forward(ops::GlaImpl::chunked, spec, seqs, in, o, Tensor(), saved);
  };
  const auto forward_backward = [&](const Tensor& saved) {
    forward(saved);
    ops::gla_backward(ops::GlaImpl::chunked, spec, seqs, in, x.d_o, Tensor(), grads, saved);
  };
  const double fwd_ms = mean_ms(iterations, [&] { forward(Tensor()); });
  const double fwd_bwd_ms = mean_ms(iterations, [&] { forward_backward(Tensor()); });
  if (saving.bytes) {
    saving.fwd_ms = mean_ms(iterations, [&] { forward(saved_buffer); });
    saving.fwd_bwd_ms = mean_ms(iterations, [&] { forward_backward(saved_buffer); });
  }
  report(std::string(ops::gla_mixer_name(mixer)), batch, fwd_ms, fwd_bwd_ms, saving);
}

void bench_hgrn(int64_t batch, int iterations, const Operands& x) {
  const int64_t D = kHeads * kKey;
  const SeqLayout seqs = SeqLayout::uniform(batch, kTokens / batch);
  const ops::HgrnInputs in{x.q.reshape({kTokens, D}), x.g_channel.reshape({kTokens, D}), Tensor()};
  Tensor o = Tensor::empty({kTokens, D}, DType::bf16, Device::cuda);
  ops::HgrnGrads grads{empty_like(in.x), empty_like(in.g), Tensor()};
  const Tensor d_o = x.d_o.reshape({kTokens, D});
  const auto forward = [&] { ops::hgrn_forward(ops::HgrnImpl::chunked, seqs, in, o, Tensor()); };
  const double fwd_ms = mean_ms(iterations, forward);
  const double fwd_bwd_ms = mean_ms(iterations, [&] {
    forward();
    ops::hgrn_backward(ops::HgrnImpl::chunked, seqs, in, d_o, Tensor(), grads);
  });
  report("hgrn", batch, fwd_ms, fwd_bwd_ms);
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = static_cast<int>(positive_arg("bench_gpu_gla", argc, argv, 1, 10));
  const std::string only_op = argc > 2 ? argv[2] : "";
  const int64_t only_T = positive_arg("bench_gpu_gla", argc, argv, 3, 0);
  ops::GlaMixer parsed{};
  if (!only_op.empty() && only_op != "hgrn" && !ops::find_gla_mixer(only_op, parsed)) {
    throw std::invalid_argument("bench_gpu_gla: unknown op '" + only_op +
                                "' (expected gla, retnet, hgrn2, mamba2, rwkv6 or hgrn)");
  }
  emit_device();
  Rng rng(2026);
  const Operands operands(rng);
  for (const int64_t batch : {8, 2}) {
    if (only_T != 0 && only_T != kTokens / batch) continue;
    for (ops::GlaMixer m : ops::gla_mixers()) {
      if (only_op.empty() || only_op == ops::gla_mixer_name(m)) bench_gla(m, batch, iterations, operands);
    }
    if (only_op.empty() || only_op == "hgrn") bench_hgrn(batch, iterations, operands);
  }
  return 0;
}

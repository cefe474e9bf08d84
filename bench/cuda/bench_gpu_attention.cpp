// bench_gpu_attention: times CUDA causal softmax attention (ops::attention_forward / _backward) in
// bf16 at the shapes of shared/ANCHORS.md (B·T = 32768 tokens, H = 16 query and kv heads, d = 128,
// T = 4096, 16384, 32768) and prints one JSON line per shape: forward ms and forward + backward ms
// (CUDA-event means), beside torch SDPA's measured figures and linea's target, and TFLOP/s with the
// causal FLOP count (forward 2·2·B·H·T²·d/2, backward 2.5× that: the 5 matmuls of the standard
// backward; our backward recomputes S and dP once more, which is not counted).
//
// Usage: bench_gpu_attention [iterations=10]
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "bench/cuda/gpu_bench.h"
#include "kernels/device_memory.h"
#include "model/mixers/attention/attention.h"

namespace {

using namespace linea;
using namespace linea::bench;

// shared/ANCHORS.md, softmax attention (torch SDPA, causal, one H200).
struct Anchor {
  int64_t seq_len;
  double torch_forward_ms, torch_total_ms, target_total_ms;
};
constexpr Anchor kAnchors[] = {{4096, 0.88, 3.60, 3.60}, {16384, 3.38, 13.0, 13.0}, {32768, 6.73, 26.0, 26.0}};

void bench_shape(const Anchor& anchor, int64_t tokens, int64_t heads, int64_t head_dim, int iterations, Rng& rng) {
  const int64_t batch = tokens / anchor.seq_len, width = heads * head_dim;
  const ops::AttentionShape shape{.q_heads = heads,
                                  .kv_heads = heads,
                                  .head_dim = head_dim,
                                  .window = 0,
                                  .scale = 1.0 / std::sqrt(static_cast<double>(head_dim))};
  const SeqLayout seqs = SeqLayout::uniform(batch, anchor.seq_len);
  const DType dt = DType::bf16;
  const Tensor q = random_device({tokens, width}, dt, rng), k = random_device({tokens, width}, dt, rng);
  const Tensor v = random_device({tokens, width}, dt, rng), dout = random_device({tokens, width}, dt, rng);
  Tensor out = Tensor::empty({tokens, width}, dt, Device::cuda);
  Tensor lse = Tensor::empty({tokens, heads}, DType::f32, Device::cuda);
  Tensor dq = Tensor::empty({tokens, width}, dt, Device::cuda), dk = Tensor::empty({tokens, width}, dt, Device::cuda);
  Tensor dv = Tensor::empty({tokens, width}, dt, Device::cuda);
  const double forward_ms = mean_ms(iterations, [&] { ops::attention_forward(out, lse, q, k, v, shape, seqs); });
  const double total_ms = mean_ms(iterations, [&] {
    ops::attention_forward(out, lse, q, k, v, shape, seqs);
    ops::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, shape, seqs);
  });
  const double forward_flop =
      2.0 * 2.0 * batch * heads * static_cast<double>(anchor.seq_len) * anchor.seq_len * head_dim / 2.0;
  emit({{"op", "attention_causal"},
        {"dtype", "bf16"},
        {"batch", batch},
        {"seq_len", anchor.seq_len},
        {"heads", heads},
        {"head_dim", head_dim},
        {"forward_ms", forward_ms},
        {"forward_backward_ms", total_ms},
        {"backward_ms", total_ms - forward_ms},
        {"forward_tflops", tflops(forward_flop, forward_ms)},
        {"forward_backward_tflops", tflops(3.5 * forward_flop, total_ms)},
        {"torch_sdpa_forward_ms", anchor.torch_forward_ms},
        {"torch_sdpa_forward_backward_ms", anchor.torch_total_ms},
        {"target_forward_backward_ms", anchor.target_total_ms},
        {"vs_target", total_ms / anchor.target_total_ms}});
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (!cuda_device_available()) throw std::runtime_error("bench_gpu_attention: no CUDA device");
    const int iterations = static_cast<int>(positive_arg("bench_gpu_attention", argc, argv, 1, 10));
    Rng rng(1);
    emit_device();
    for (const Anchor& anchor : kAnchors) bench_shape(anchor, 32768, 16, 128, iterations, rng);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

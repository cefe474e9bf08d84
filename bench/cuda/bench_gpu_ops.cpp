// bench_gpu_ops: times the CUDA ops with CUDA events and prints one JSON line per measurement.
//
// First the GEMM ceiling: an 8192³ bf16 product through cuBLASLt (kernels/cuda/gemm.h), in the
// linear layer's layout (x · Wᵀ) and the plain one, as TFLOP/s. Then every op of kernels/ops.h
// that has a CUDA implementation, forward and backward, at a 340M-model shape (by default
// N = 8 × 4096 tokens, d_model 1024, 4 heads of d_k 256 and d_v 512, SwiGLU 2816, vocabulary
// 32000, conv width 4), in bf16 and f32: the mean milliseconds over the timed launches, and either
// TFLOP/s (GEMM-bound ops) or GB/s of the bytes each op must read and write at least.
//
// Usage: bench_gpu_ops [tokens=32768] [d_model=1024] [vocab=32000] [iterations=20]
#include <cuda_runtime.h>

#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/cuda/gpu_bench.h"
#include "kernels/cuda/gemm.h"
#include "kernels/device_memory.h"
#include "kernels/ops.h"
#include "kernels/random.h"

namespace {

using namespace linea;
using namespace linea::bench;

void bench_gemm_ceiling(int iterations, Rng& rng) {
  const int64_t s = 8192;
  Tensor a = random_device({s, s}, DType::bf16, rng), b = random_device({s, s}, DType::bf16, rng);
  Tensor c = Tensor::empty({s, s}, DType::bf16, Device::cuda);
  const cuda::GemmOperands types{DType::bf16, DType::bf16};
  for (bool transpose_b : {true, false}) {
    const double ms = mean_ms(iterations, [&] {
      cuda::gemm(false, transpose_b, s, s, s, 1.0f, a.raw(), s, b.raw(), s, 0.0f, c.raw(), s, types);
    });
    emit({{"op", "gemm_bf16"},
          {"layout", transpose_b ? "A·Bᵀ" : "A·B"},
          {"m", s},
          {"n", s},
          {"k", s},
          {"ms", ms},
          {"tflops", tflops(2.0 * s * s * s, ms)}});
  }
}

struct ModelShape {
  int64_t n, d, vocab, heads, dk, dv, ffn, conv;
};

void bench_ops(const ModelShape& m, DType dt, int iterations, Rng& rng) {
  const double e = static_cast<double>(dtype_size(dt));
  const int64_t n = m.n, d = m.d, key = m.heads * m.dk, value = m.heads * m.dv;
  auto line = [&](const std::string& op, double fwd_ms, double bwd_ms, nlohmann::json extra) {
    nlohmann::json j = {{"op", op},
                        {"dtype", std::string(dtype_name(dt))},
                        {"tokens", n},
                        {"forward_ms", fwd_ms},
                        {"backward_ms", bwd_ms}};
    j.update(extra);
    emit(j);
  };
  auto empty = [&](const Shape& s) { return Tensor::empty(s, dt, Device::cuda); };
  auto zeros = [&](const Shape& s) { return Tensor::zeros(s, dt, Device::cuda); };
  auto stats = [&](const Shape& s) { return Tensor::empty(s, DType::f32, Device::cuda); };
  const SeqLayout seqs = SeqLayout::uniform(n / 4096 > 0 ? n / 4096 : 1, n / 4096 > 0 ? 4096 : n);
  const Tensor x = random_device({n, d}, dt, rng), dy = random_device({n, d}, dt, rng);
  const double row = n * d * e;

  {  // linear d → ffn: forward 2·N·d·F, backward 4·N·d·F
    Tensor w = random_device({m.ffn, d}, dt, rng, -0.05, 0.05), b = random_device({m.ffn}, dt, rng);
    Tensor out = empty({n, m.ffn}), dout = random_device({n, m.ffn}, dt, rng), dx = empty({n, d});
    Tensor dw = zeros({m.ffn, d}), db = zeros({m.ffn});
    const double f = mean_ms(iterations, [&] { ops::linear_forward(out, x, w, b); });
    const double bw = mean_ms(iterations, [&] { ops::linear_backward(dx, dw, db, dout, x, w, false); });
    const double flop = 2.0 * n * d * m.ffn;
    line("linear", f, bw,
         {{"in", d}, {"out", m.ffn}, {"forward_tflops", tflops(flop, f)}, {"backward_tflops", tflops(2 * flop, bw)}});
  }
  {  // LM head + cross-entropy: 2·N·d·V forward, 6·N·d·V with gradients
    Tensor head = random_device({m.vocab, d}, dt, rng, -0.05, 0.05), targets = device_ids(n, m.vocab, rng);
    Tensor dx = empty({n, d}), dw = zeros({m.vocab, d});
    double loss = 0;
    const double f = mean_ms(iterations, [&] { loss = ops::lm_head_cross_entropy(x, head, targets, 1.0 / n, {}, {}); });
    const double total = mean_ms(iterations, [&] { ops::lm_head_cross_entropy(x, head, targets, 1.0 / n, dx, dw); });
    const double flop = 2.0 * n * d * m.vocab;
    line("lm_head_cross_entropy", f, total - f,
         {{"vocab", m.vocab},
          {"mean_loss", loss / n},
          {"forward_tflops", tflops(flop, f)},
          {"total_tflops", tflops(3 * flop, total)}});
  }
  {
    Tensor table = random_device({m.vocab, d}, dt, rng), ids = device_ids(n, m.vocab, rng);
    Tensor out = empty({n, d}), dtable = zeros({m.vocab, d});
    const double f = mean_ms(iterations, [&] { ops::embedding_forward(out, table, ids); });
    const double bw = mean_ms(iterations, [&] { ops::embedding_backward(dtable, dy, ids); });
    line("embedding", f, bw, {{"forward_gbs", gbs(2 * row, f)}, {"backward_gbs", gbs(3 * row, bw)}});
  }
  {
    Tensor y = random_device({n, d}, dt, rng);
    const double f = mean_ms(iterations, [&] { ops::add_inplace(y, x); });
    line("add_inplace", f, 0, {{"forward_gbs", gbs(3 * row, f)}});
  }
  {
    Tensor w = random_device({d}, dt, rng, 0.5, 1.5), out = empty({n, d}), rstd = stats({n});
    Tensor dx = empty({n, d}), dw = zeros({d});
    const double f = mean_ms(iterations, [&] { ops::rmsnorm_forward(out, rstd, x, w, 1e-6); });
    const double bw = mean_ms(iterations, [&] { ops::rmsnorm_backward(dx, dw, dy, x, w, rstd); });
    line("rmsnorm", f, bw, {{"forward_gbs", gbs(2 * row, f)}, {"backward_gbs", gbs(3 * row, bw)}});
  }
  // The output norm of a GDN layer: value width, per-head, silu gate; at the model's head width d_v
  // and at 128 (several heads per warp).
  for (const int64_t head_width : {m.dv, int64_t{128}}) {
    const double bytes = n * value * e;
    const int64_t heads = value / head_width;
    Tensor o = random_device({n, value}, dt, rng), z = random_device({n, value}, dt, rng);
    Tensor dout = random_device({n, value}, dt, rng), w = random_device({head_width}, dt, rng, 0.5, 1.5);
    Tensor out = empty({n, value}), rstd = stats({n, heads}), d_o = empty({n, value}), dz = empty({n, value});
    Tensor dw = zeros({head_width});
    const auto act = ops::GateActivation::silu;
    const double f = mean_ms(iterations, [&] { ops::gated_rmsnorm_forward(out, rstd, o, z, w, heads, act, 1e-6); });
    const double bw =
        mean_ms(iterations, [&] { ops::gated_rmsnorm_backward(d_o, dz, dw, dout, o, z, w, rstd, heads, act); });
    line("gated_rmsnorm_silu", f, bw,
         {{"width", value},
          {"head_width", head_width},
          {"forward_gbs", gbs(3 * bytes, f)},
          {"backward_gbs", gbs(5 * bytes, bw)}});
  }
  {  // q/k normalisation
    const double bytes = n * key * e;
    Tensor q = random_device({n, key}, dt, rng), dq = random_device({n, key}, dt, rng);
    Tensor out = empty({n, key}), rstd = stats({n, m.heads}), dx = empty({n, key});
    const double f = mean_ms(iterations, [&] { ops::l2norm_forward(out, rstd, q, m.heads, 1e-6); });
    const double bw = mean_ms(iterations, [&] { ops::l2norm_backward(dx, dq, out, rstd, m.heads); });
    line("l2norm", f, bw, {{"width", key}, {"forward_gbs", gbs(2 * bytes, f)}, {"backward_gbs", gbs(3 * bytes, bw)}});
  }
  {  // RoPE on q (a transformer layer's shape: d_model split into heads of 128)
    Tensor q = random_device({n, d}, dt, rng), positions = Tensor::empty({n}, DType::i32, Device::cuda);
    std::vector<int32_t> pos = seqs.positions();
    positions.copy_from(Tensor::view(pos.data(), {n}, DType::i32));
    const double f = mean_ms(iterations, [&] { ops::rope_apply(q, positions, d / 128, 10000.0, false); });
    const double bw = mean_ms(iterations, [&] { ops::rope_apply(q, positions, d / 128, 10000.0, true); });
    line("rope", f, bw, {{"forward_gbs", gbs(2 * row, f)}, {"backward_gbs", gbs(2 * row, bw)}});
  }
  {  // the short convolution of q (key width)
    const double bytes = n * key * e;
    Tensor q = random_device({n, key}, dt, rng), dout = random_device({n, key}, dt, rng);
    Tensor w = random_device({key, m.conv}, dt, rng, -0.5, 0.5), out = empty({n, key}), dx = empty({n, key});
    Tensor dw = zeros({key, m.conv});
    const double f = mean_ms(iterations, [&] { ops::short_conv_silu_forward(out, q, w, seqs); });
    const double bw = mean_ms(iterations, [&] { ops::short_conv_silu_backward(dx, dw, dout, q, w, seqs); });
    line("short_conv_silu", f, bw,
         {{"width", key}, {"forward_gbs", gbs(2 * bytes, f)}, {"backward_gbs", gbs(3 * bytes, bw)}});
  }
  {
    const double bytes = n * m.ffn * e;
    Tensor gate = random_device({n, m.ffn}, dt, rng, -4, 4), up = random_device({n, m.ffn}, dt, rng);
    Tensor out = empty({n, m.ffn}), dgate = empty({n, m.ffn}), dup = empty({n, m.ffn});
    const double f = mean_ms(iterations, [&] { ops::swiglu_forward(out, gate, up); });
    const double bw = mean_ms(iterations, [&] { ops::swiglu_backward(dgate, dup, out, gate, up); });
    line("swiglu", f, bw, {{"ffn", m.ffn}, {"forward_gbs", gbs(3 * bytes, f)}, {"backward_gbs", gbs(5 * bytes, bw)}});
  }
  {  // β per head
    const double bytes = n * m.heads * e;
    Tensor logits = random_device({n, m.heads}, dt, rng), beta = empty({n, m.heads}), dl = empty({n, m.heads});
    const double f = mean_ms(iterations, [&] { ops::sigmoid_gate_forward(beta, logits, 2.0); });
    const double bw = mean_ms(iterations, [&] { ops::sigmoid_gate_backward(dl, logits, beta, 2.0); });
    line("sigmoid_gate", f, bw,
         {{"width", m.heads}, {"forward_gbs", gbs(2 * bytes, f)}, {"backward_gbs", gbs(3 * bytes, bw)}});
  }
  {  // per-channel decay (KDA layout): a: [N, H·d_k]
    const double bytes = n * key * e;
    Tensor a = random_device({n, key}, dt, rng), dg = random_device({n, key}, dt, rng);
    Tensor A_log = random_device({m.heads}, dt, rng, 0, 2.7), dt_bias = random_device({key}, dt, rng, -5, -2);
    Tensor g = empty({n, key}), da = empty({n, key}), dA = zeros({m.heads}), ddt = zeros({key});
    const double f = mean_ms(iterations, [&] { ops::decay_gate_forward(g, a, A_log, dt_bias); });
    const double bw = mean_ms(iterations, [&] { ops::decay_gate_backward(da, dA, ddt, dg, a, A_log, dt_bias); });
    line("decay_gate", f, bw,
         {{"width", key}, {"forward_gbs", gbs(2 * bytes, f)}, {"backward_gbs", gbs(3 * bytes, bw)}});
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (!cuda_device_available()) throw std::runtime_error("bench_gpu_ops: no CUDA device");
    const ModelShape shape{positive_arg("bench_gpu_ops", argc, argv, 1, 32768),
                           positive_arg("bench_gpu_ops", argc, argv, 2, 1024),
                           positive_arg("bench_gpu_ops", argc, argv, 3, 32000),
                           4,
                           256,
                           512,
                           2816,
                           4};
    const int iterations = static_cast<int>(positive_arg("bench_gpu_ops", argc, argv, 4, 20));
    if (shape.d % 128 != 0) throw std::invalid_argument("bench_gpu_ops: d_model must be a multiple of 128");
    Rng rng(1);
    emit_device();
    bench_gemm_ceiling(iterations, rng);
    for (DType dt : {DType::bf16, DType::f32}) bench_ops(shape, dt, iterations, rng);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

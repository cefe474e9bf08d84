// bench_ops: times the CPU kernels of every op in kernels/ops.h (forward and backward, f32) at one
// model-like shape and prints one JSON line per op: best-of-repeats milliseconds, and either
// GFLOP/s with the ratio to a plain BLAS sgemm of the same shape measured in this run (GEMM-bound
// ops) or the GB/s of the tensors read and written (the others).
//
// Usage: bench_ops [tokens=2048] [d_model=512] [vocab=4096] [repeats=5]
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "bench/bench_util.h"
#include "kernels/cpu/gemm.h"
#include "kernels/ops.h"
#include "kernels/random.h"

namespace {

using namespace linea;

Tensor random_f32(const Shape& shape, Rng& rng, double lo = -1, double hi = 1) {
  Tensor t = Tensor::empty(shape, DType::f32);
  fill_uniform(t, rng, lo, hi);
  return t;
}

Tensor ids_tensor(int64_t n, int64_t vocab, Rng& rng) {
  Tensor t = Tensor::empty({n}, DType::i32);
  for (int64_t i = 0; i < n; ++i) t.data<int32_t>()[i] = static_cast<int32_t>(rng.next_u64() % vocab);
  return t;
}

int run(int argc, char** argv) {
  const int64_t n = bench::positional_count(argc, argv, 1, 2048), d = bench::positional_count(argc, argv, 2, 512);
  const int64_t vocab = bench::positional_count(argc, argv, 3, 4096);
  const int repeats = static_cast<int>(bench::positional_count(argc, argv, 4, 5));
  const int64_t heads = 4, head_dim = d / heads, conv_width = 4;
  const int64_t ffn = 256 * ((d * 8 / 3 + 255) / 256);
  if (d % (2 * heads) != 0) throw std::invalid_argument("d_model: expected a multiple of 8, got " + std::to_string(d));
  const SeqLayout seqs = SeqLayout::uniform(1, n);
  Rng rng(1);

  auto emit = [&](const std::string& op, double fwd_ms, double bwd_ms, nlohmann::json extra) {
    nlohmann::json line = {{"op", op}, {"tokens", n}, {"d_model", d}, {"forward_ms", fwd_ms}, {"backward_ms", bwd_ms}};
    line.update(extra);
    bench::print_json_line(line);
  };
  auto bandwidth = [](double bytes, double ms) { return bytes / (ms * 1e6); };
  const double row_bytes = static_cast<double>(n * d) * 4;

  // Reference: one sgemm of the linear layer's forward shape.
  Tensor x = random_f32({n, d}, rng), w = random_f32({d, d}, rng), y = Tensor::empty({n, d}, DType::f32);
  const double gemm_ms = bench::best_ms(repeats, [&] {
    cpu::gemm<float>(false, true, n, d, d, 1.f, x.data<float>(), d, w.data<float>(), d, 0.f, y.data<float>(), d);
  });
  const double gemm_gflops = 2.0 * n * d * d / (gemm_ms * 1e6);
  emit("sgemm_reference", gemm_ms, 0, {{"gflops", gemm_gflops}});

  {  // linear: forward 2·N·d·d, backward 4·N·d·d
    Tensor b = random_f32({d}, rng), dx = Tensor::empty({n, d}, DType::f32);
    Tensor dw = Tensor::zeros({d, d}, DType::f32), db = Tensor::zeros({d}, DType::f32);
    const double f = bench::best_ms(repeats, [&] { ops::linear_forward(y, x, w, b); });
    const double bw = bench::best_ms(repeats, [&] { ops::linear_backward(dx, dw, db, y, x, w, false); });
    const double gflops = 6.0 * n * d * d / ((f + bw) * 1e6);
    emit("linear", f, bw, {{"gflops", gflops}, {"ratio_to_sgemm", gflops / gemm_gflops}});
  }
  {  // fused LM head + cross-entropy: 6·N·d·V
    Tensor head = random_f32({vocab, d}, rng, -0.05, 0.05), targets = ids_tensor(n, vocab, rng);
    Tensor dx = Tensor::empty({n, d}, DType::f32), dw = Tensor::zeros({vocab, d}, DType::f32);
    double loss = 0;
    const double f =
        bench::best_ms(repeats, [&] { loss = ops::lm_head_cross_entropy(x, head, targets, 1.0 / n, {}, {}); });
    const double total =
        bench::best_ms(repeats, [&] { ops::lm_head_cross_entropy(x, head, targets, 1.0 / n, dx, dw); });
    const double gflops = 6.0 * n * d * vocab / (total * 1e6);
    emit("lm_head_cross_entropy", f, total - f,
         {{"vocab", vocab}, {"mean_loss", loss / n}, {"gflops", gflops}, {"ratio_to_sgemm", gflops / gemm_gflops}});
  }
  {
    Tensor table = random_f32({vocab, d}, rng), ids = ids_tensor(n, vocab, rng);
    Tensor dtable = Tensor::zeros({vocab, d}, DType::f32);
    const double f = bench::best_ms(repeats, [&] { ops::embedding_forward(y, table, ids); });
    const double bw = bench::best_ms(repeats, [&] { ops::embedding_backward(dtable, y, ids); });
    emit("embedding", f, bw,
         {{"forward_gbs", bandwidth(2 * row_bytes, f)}, {"backward_gbs", bandwidth(3 * row_bytes, bw)}});
  }
  {
    const double f = bench::best_ms(repeats, [&] { ops::add_inplace(y, x); });
    emit("add_inplace", f, 0, {{"forward_gbs", bandwidth(3 * row_bytes, f)}});
  }
  {
    Tensor weight = random_f32({d}, rng), rstd = Tensor::empty({n}, DType::f32);
    Tensor dx = Tensor::empty({n, d}, DType::f32), dw = Tensor::zeros({d}, DType::f32);
    const double f = bench::best_ms(repeats, [&] { ops::rmsnorm_forward(y, rstd, x, weight, 1e-6); });
    const double bw = bench::best_ms(repeats, [&] { ops::rmsnorm_backward(dx, dw, y, x, weight, rstd); });
    emit("rmsnorm", f, bw,
         {{"forward_gbs", bandwidth(2 * row_bytes, f)}, {"backward_gbs", bandwidth(3 * row_bytes, bw)}});
  }
  {
    Tensor z = random_f32({n, d}, rng), weight = random_f32({head_dim}, rng);
    Tensor rstd = Tensor::empty({n, heads}, DType::f32), d_o = Tensor::empty({n, d}, DType::f32);
    Tensor dz = Tensor::empty({n, d}, DType::f32), dw = Tensor::zeros({head_dim}, DType::f32);
    const auto act = ops::GateActivation::silu;
    const double f =
        bench::best_ms(repeats, [&] { ops::gated_rmsnorm_forward(y, rstd, x, z, weight, heads, act, 1e-6); });
    const double bw =
        bench::best_ms(repeats, [&] { ops::gated_rmsnorm_backward(d_o, dz, dw, y, x, z, weight, rstd, heads, act); });
    emit("gated_rmsnorm_silu", f, bw,
         {{"forward_gbs", bandwidth(3 * row_bytes, f)}, {"backward_gbs", bandwidth(5 * row_bytes, bw)}});
  }
  {
    Tensor rstd = Tensor::empty({n, heads}, DType::f32), dx = Tensor::empty({n, d}, DType::f32);
    const double f = bench::best_ms(repeats, [&] { ops::l2norm_forward(y, rstd, x, heads, 1e-6); });
    const double bw = bench::best_ms(repeats, [&] { ops::l2norm_backward(dx, x, y, rstd, heads); });
    emit("l2norm", f, bw,
         {{"forward_gbs", bandwidth(2 * row_bytes, f)}, {"backward_gbs", bandwidth(3 * row_bytes, bw)}});
  }
  {
    Tensor positions = Tensor::empty({n}, DType::i32);
    const std::vector<int32_t> pos = seqs.positions();
    std::copy(pos.begin(), pos.end(), positions.data<int32_t>());
    const double f = bench::best_ms(repeats, [&] { ops::rope_apply(y, positions, heads, 10000.0, false); });
    const double bw = bench::best_ms(repeats, [&] { ops::rope_apply(y, positions, heads, 10000.0, true); });
    emit("rope", f, bw, {{"forward_gbs", bandwidth(2 * row_bytes, f)}});
  }
  {
    Tensor weight = random_f32({d, conv_width}, rng, -0.5, 0.5), dx = Tensor::empty({n, d}, DType::f32);
    Tensor dw = Tensor::zeros({d, conv_width}, DType::f32);
    const double f = bench::best_ms(repeats, [&] { ops::short_conv_silu_forward(y, x, weight, seqs); });
    const double bw = bench::best_ms(repeats, [&] { ops::short_conv_silu_backward(dx, dw, y, x, weight, seqs); });
    emit("short_conv_silu", f, bw,
         {{"forward_gbs", bandwidth(2 * row_bytes, f)}, {"backward_gbs", bandwidth(3 * row_bytes, bw)}});
  }
  {
    const double ffn_bytes = static_cast<double>(n * ffn) * 4;
    Tensor gate = random_f32({n, ffn}, rng, -4, 4), up = random_f32({n, ffn}, rng);
    Tensor out = Tensor::empty({n, ffn}, DType::f32), dgate = Tensor::empty({n, ffn}, DType::f32);
    Tensor dup = Tensor::empty({n, ffn}, DType::f32);
    const double f = bench::best_ms(repeats, [&] { ops::swiglu_forward(out, gate, up); });
    const double bw = bench::best_ms(repeats, [&] { ops::swiglu_backward(dgate, dup, out, gate, up); });
    emit("swiglu", f, bw,
         {{"ffn", ffn}, {"forward_gbs", bandwidth(3 * ffn_bytes, f)}, {"backward_gbs", bandwidth(5 * ffn_bytes, bw)}});
  }
  {
    Tensor beta = Tensor::empty({n, d}, DType::f32), dl = Tensor::empty({n, d}, DType::f32);
    const double f = bench::best_ms(repeats, [&] { ops::sigmoid_gate_forward(beta, x, 2.0); });
    const double bw = bench::best_ms(repeats, [&] { ops::sigmoid_gate_backward(dl, x, beta, 2.0); });
    emit("sigmoid_gate", f, bw,
         {{"forward_gbs", bandwidth(2 * row_bytes, f)}, {"backward_gbs", bandwidth(3 * row_bytes, bw)}});
  }
  {  // per-channel decay (KDA layout): a: [N, H·head_dim]
    Tensor A_log = random_f32({heads}, rng, 0, 2.7), dt_bias = random_f32({d}, rng, -5, -2);
    Tensor da = Tensor::empty({n, d}, DType::f32), dA = Tensor::zeros({heads}, DType::f32);
    Tensor ddt = Tensor::zeros({d}, DType::f32);
    const double f = bench::best_ms(repeats, [&] { ops::decay_gate_forward(y, x, A_log, dt_bias); });
    const double bw = bench::best_ms(repeats, [&] { ops::decay_gate_backward(da, dA, ddt, y, x, A_log, dt_bias); });
    emit("decay_gate", f, bw,
         {{"forward_gbs", bandwidth(2 * row_bytes, f)}, {"backward_gbs", bandwidth(3 * row_bytes, bw)}});
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return linea::bench::main_reporting_errors("bench_ops", run, argc, argv); }

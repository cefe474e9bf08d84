// bench_delta_rule: times the CPU delta rule (forward, and forward + backward) for each mixer of the
// family, recurrent and chunked, f32, at one shape; prints one JSON line per (mixer, impl): best-of-
// repeats milliseconds, tokens/s, and the chunked/recurrent speed ratio measured in the same run.
//
// Usage: bench_delta_rule [batch=2] [seq_len=1024] [heads=4] [key_dim=128] [value_dim=128] [repeats=3]
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "bench/bench_util.h"
#include "kernels/random.h"
#include "model/mixers/delta_rule/delta_rule.h"
#include "model/mixers/delta_rule/delta_rule_config.h"

namespace {

using namespace linea;

Tensor uniform(const Shape& shape, Rng& rng, double lo, double hi) {
  Tensor t = Tensor::empty(shape, DType::f32);
  fill_uniform(t, rng, lo, hi);
  return t;
}

// Unit rows over the last dimension (the caller of the delta rule L2-normalises q and k).
Tensor unit_rows(const Shape& shape, Rng& rng) {
  Tensor t = uniform(shape, rng, -1, 1);
  const int64_t D = shape.back();
  float* x = t.data<float>();
  for (int64_t r = 0; r < t.numel() / D; ++r) {
    double ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += x[r * D + d] * x[r * D + d];
    for (int64_t d = 0; d < D; ++d) x[r * D + d] /= static_cast<float>(std::sqrt(ss + 1e-6));
  }
  return t;
}

int run(int argc, char** argv) {
  const int64_t batch = bench::positional_count(argc, argv, 1, 2),
                seq_len = bench::positional_count(argc, argv, 2, 1024);
  const int64_t H = bench::positional_count(argc, argv, 3, 4), K = bench::positional_count(argc, argv, 4, 128),
                V = bench::positional_count(argc, argv, 5, 128);
  const int repeats = static_cast<int>(bench::positional_count(argc, argv, 6, 3));
  const SeqLayout seqs = SeqLayout::uniform(batch, seq_len);
  const int64_t N = seqs.num_tokens();
  Rng rng(1);

  for (const DeltaRulePreset& m : delta_rule_presets()) {
    const ops::DeltaRuleSpec spec{m.decay, m.gate, 1 / std::sqrt(static_cast<double>(K))};
    ops::DeltaRuleInputs in;
    in.q = unit_rows({N, H, K}, rng);
    in.k = unit_rows({N, H, K}, rng);
    in.v = uniform({N, H, V}, rng, -1, 1);
    ops::DeltaRuleGrads grads;
    grads.dq = Tensor::empty({N, H, K}, DType::f32);
    grads.dk = Tensor::empty({N, H, K}, DType::f32);
    grads.dv = Tensor::empty({N, H, V}, DType::f32);
    if (m.gate == ops::GateKind::beta) {
      in.beta = uniform({N, H}, rng, 0.5, 0.75);
      grads.dbeta = Tensor::empty({N, H}, DType::f32);
    } else {
      in.b = uniform({N, H, K}, rng, 0.5, 0.75);
      in.w = uniform({N, H, V}, rng, 0.5, 0.75);
      grads.db = Tensor::empty({N, H, K}, DType::f32);
      grads.dw = Tensor::empty({N, H, V}, DType::f32);
    }
    if (m.decay != ops::DecayKind::none) {
      const Shape g_shape = m.decay == ops::DecayKind::scalar ? Shape{N, H} : Shape{N, H, K};
      in.g = uniform(g_shape, rng, -0.1, -0.01);
      grads.dg = Tensor::empty(g_shape, DType::f32);
    }
    const Tensor o = Tensor::empty({N, H, V}, DType::f32), d_o = uniform({N, H, V}, rng, -1, 1);

    double recurrent_ms[2] = {0, 0};
    for (ops::DeltaRuleImpl impl : {ops::DeltaRuleImpl::recurrent, ops::DeltaRuleImpl::chunked}) {
      const double fwd = bench::best_ms(repeats, [&] { ops::delta_rule_forward(impl, spec, seqs, in, o, Tensor()); });
      const double fwd_bwd = bench::best_ms(repeats, [&] {
        ops::delta_rule_forward(impl, spec, seqs, in, o, Tensor());
        ops::delta_rule_backward(impl, spec, seqs, in, d_o, Tensor(), grads);
      });
      const bool recurrent = impl == ops::DeltaRuleImpl::recurrent;
      if (recurrent) recurrent_ms[0] = fwd, recurrent_ms[1] = fwd_bwd;
      const nlohmann::json line = {{"bench", "delta_rule_cpu"},
                                   {"mixer", m.name},
                                   {"impl", recurrent ? "recurrent" : "chunked"},
                                   {"dtype", "f32"},
                                   {"tokens", N},
                                   {"heads", H},
                                   {"key_dim", K},
                                   {"value_dim", V},
                                   {"forward_ms", fwd},
                                   {"forward_backward_ms", fwd_bwd},
                                   {"forward_tokens_per_s", N / (fwd * 1e-3)},
                                   {"forward_backward_tokens_per_s", N / (fwd_bwd * 1e-3)},
                                   {"forward_speedup_vs_recurrent", recurrent_ms[0] / fwd},
                                   {"forward_backward_speedup_vs_recurrent", recurrent_ms[1] / fwd_bwd}};
      bench::print_json_line(line);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return linea::bench::main_reporting_errors("bench_delta_rule", run, argc, argv); }

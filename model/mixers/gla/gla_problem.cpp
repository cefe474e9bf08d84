#include "model/mixers/gla/gla_problem.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "model/mixer_problem_file.h"
#include "model/mixers/gla/gla.h"
#include "model/mixers/gla/presets.h"

namespace linea {

namespace {

// One problem in the op's layout ([N = B·T, H, ·]); d_o zeros when `do` is absent.
struct GlaFileProblem {
  HeadProblemShape shape;
  ops::GlaSpec spec;
  ops::GlaInputs in;
  Tensor d_o, dht;
};

GlaFileProblem read_problem(const std::filesystem::path& path, ops::GlaMixer mixer, DType compute) {
  const std::string name(ops::gla_mixer_name(mixer));
  const MixerProblemFile file(path, name);
  GlaFileProblem p;
  p.shape = file.head_problem_shape();
  const HeadProblemShape& shape = p.shape;
  p.spec = ops::gla_mixer_spec(mixer, shape.key_dim);

  const int64_t b = shape.batch, t = shape.seq_len, h = shape.heads, k = shape.key_dim, vd = shape.value_dim;
  const bool given_key = p.spec.key == ops::GlaKey::given,
             bonus = p.spec.readout == ops::GlaReadout::before_write_bonus;
  const DatasetRule decay =
      p.spec.decay == ops::GlaDecay::head
          ? DatasetRule{"g", Presence::forbidden, {}, "retnet's decays are fixed per head, log(1 − 2^(−5−h))"}
      : p.spec.decay == ops::GlaDecay::scalar
          ? DatasetRule{"g", Presence::required, {b, t, h}, "[B, T, H], one log decay per head"}
          : DatasetRule{"g", Presence::required, {b, t, h, k}, "[B, T, H, K], one log decay per key channel"};
  const std::vector<DatasetRule> rules = {
      given_key ? DatasetRule{"k", Presence::required, {b, t, h, k}, "[B, T, H, K]"}
                : DatasetRule{"k", Presence::forbidden, {}, "hgrn2's key is tied to its decay, k = 1 − exp(g)"},
      decay,
      bonus ? DatasetRule{"u", Presence::required, {h, k}, "[H, K], the bonus"}
            : DatasetRule{"u", Presence::forbidden, {}, "only rwkv6 has the bonus u"},
  };
  for (const DatasetRule& rule : rules) file.check(rule);
  file.check_head_optionals(shape);

  const int64_t n = b * t;
  p.in.q = file.read("q", compute, {n, h, k});
  if (given_key) p.in.k = file.read("k", compute, {n, h, k});
  p.in.v = file.read("v", compute, {n, h, vd});
  switch (p.spec.decay) {
    case ops::GlaDecay::channel: p.in.g = file.read("g", compute, {n, h, k}, true); break;
    case ops::GlaDecay::scalar: p.in.g = file.read("g", compute, {n, h}, true); break;
    case ops::GlaDecay::head: p.in.g = ops::retnet_log_decays(h, 0, compute); break;
  }
  if (bonus) p.in.u = file.read("u", compute, {h, k});
  file.read_head_optionals(shape, compute, p.in.h0, p.d_o, p.dht);
  return p;
}

// The problem on the GPU: token operands and do in `dtype`; g, u, h0 and dht in f32.
GlaFileProblem on_gpu(const GlaFileProblem& p, DType dtype) {
  GlaFileProblem g = p;
  for (Tensor* t : {&g.in.q, &g.in.k, &g.in.v, &g.d_o}) *t = to_gpu(*t, dtype);
  for (Tensor* t : {&g.in.g, &g.in.u, &g.in.h0, &g.dht}) *t = to_gpu(*t, DType::f32);
  return g;
}

// Forward and backward; OUT's datasets in fla's layout, as f32. On the GPU the gradients take their
// inputs' dtypes and the states are f32.
std::vector<std::pair<std::string, Tensor>> forward_backward(const GlaFileProblem& p, ops::GlaImpl impl) {
  const HeadProblemShape& shape = p.shape;
  const HeadRunBuffers b(shape, p.in.q);
  ops::gla_forward(impl, p.spec, shape.seqs, p.in, b.o, b.ht);

  ops::GlaGrads grads{b.like(p.in.q), b.like(p.in.k),
                      b.like(p.in.v), p.spec.decay == ops::GlaDecay::head ? Tensor() : b.like(p.in.g),
                      b.like(p.in.u), b.dh0};
  ops::gla_backward(impl, p.spec, shape.seqs, p.in, p.d_o, p.dht, grads);

  const auto tokens = [&](const Tensor& t) { return tokens_to_batch(t, shape.batch, shape.seq_len); };
  std::vector<std::pair<std::string, Tensor>> out = {{"o", tokens(b.o)},
                                                     {"ht", host_f32(b.ht)},
                                                     {"dq", tokens(grads.dq)},
                                                     {"dv", tokens(grads.dv)},
                                                     {"dh0", host_f32(grads.dh0)}};
  if (grads.dk.defined()) out.emplace_back("dk", tokens(grads.dk));
  if (grads.dg.defined()) out.emplace_back("dg", tokens(grads.dg));
  if (grads.du.defined()) out.emplace_back("du", host_f32(grads.du));
  return out;
}

constexpr const char* kHelp =
    R"(  --mixer  gla       per-key-channel log decay g, reads S_t, scale 1/sqrt(K)
           retnet    fixed decay 1 − 2^(−5−h) per head h, reads S_t, scale 1/sqrt(K)
           hgrn2     per-channel g with the key tied to it, k = 1 − exp(g); scale 1/sqrt(K)
           mamba2    one log decay g per token and head, reads S_t, scale 1
           rwkv6     per-channel g, reads S_{t−1} plus the bonus (q·(u ⊙ k)) v, scale 1
           (recurrence S_t = Diag(exp(g_t)) S_{t−1} + k_t v_tᵀ; model/mixers/gla/gla.h)
  --impl   recurrent token by token, the reference; computed in f64
           chunked   the chunked (C = 64) training algorithm; computed in f32
           cuda      the chunked algorithm on the GPU (model/mixers/gla/cuda/gla.h): q, k, v and do
                     in --dtype, g, u, h0 and dht in f32, arithmetic in f32; K ≤ 256
  --dtype  f32 (default) or bf16: the GPU operands' dtype; only with --impl cuda

IN: f32 datasets as for the delta rule (q [B, T, H, K], v [B, T, H, V], cu_seqlens, h0, do, dht):
  k           [B, T, H, K]  gla, retnet, mamba2, rwkv6 (not hgrn2)
  g           log decay (≤ 0): [B, T, H, K] for gla, hgrn2, rwkv6; [B, T, H] for mamba2; not retnet
  u           [H, K]        rwkv6 only
OUT: o, ht, and dq, dk, dv, dg, du, dh0 for the inputs the mixer takes.
)";

class GlaProblemFormat final : public MixerProblemFormat {
 public:
  std::string_view help() const override { return kHelp; }

  MixerRun run(const std::filesystem::path& in, std::string_view mixer, MixerImpl impl,
               DType gpu_dtype) const override {
    ops::GlaMixer m{};
    if (!ops::find_gla_mixer(mixer, m))
      throw std::invalid_argument("gla family: unknown mixer '" + std::string(mixer) + "'");
    return run_head_problem(
        impl, gpu_dtype, [&](DType compute) { return read_problem(in, m, compute); }, on_gpu,
        [](const GlaFileProblem& p, bool recurrent) {
          return forward_backward(p, recurrent ? ops::GlaImpl::recurrent : ops::GlaImpl::chunked);
        });
  }
};

}  // namespace

const MixerProblemFormat& gla_problem_format() {
  static const GlaProblemFormat format;
  return format;
}

}  // namespace linea

#include "model/mixers/delta_rule/delta_rule_problem.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "model/mixer_problem_file.h"

namespace linea {

DeltaRuleFileProblem read_delta_rule_problem(const std::filesystem::path& path, const DeltaRulePreset& preset,
                                             DType compute) {
  if (compute != DType::f32 && compute != DType::f64) {
    throw std::invalid_argument("read_delta_rule_problem: compute dtype must be f32 or f64");
  }
  const MixerProblemFile file(path, preset.name);
  DeltaRuleFileProblem p;

  p.shape = file.head_problem_shape();
  const HeadProblemShape& shape = p.shape;
  const int64_t b = shape.batch, t = shape.seq_len, h = shape.heads, k = shape.key_dim, vd = shape.value_dim;
  p.spec = {preset.decay, preset.gate, 1.0 / std::sqrt(static_cast<double>(k))};
  const ops::DeltaRuleSpec& spec = p.spec;
  const bool beta_gate = spec.gate == ops::GateKind::beta;
  const std::vector<DatasetRule> rules = {
      {"k", Presence::required, {b, t, h, k}, "[B, T, H, K]"},
      {"beta",
       beta_gate ? Presence::required : Presence::forbidden,
       {b, t, h},
       beta_gate ? "[B, T, H]" : "gdn2 takes the erase gate 'b' [B, T, H, K] and write gate 'w' [B, T, H, V] instead"},
      {"b",
       beta_gate ? Presence::forbidden : Presence::required,
       {b, t, h, k},
       beta_gate ? "only gdn2 has the erase gate 'b'; this mixer takes 'beta' [B, T, H]" : "[B, T, H, K]"},
      {"w",
       beta_gate ? Presence::forbidden : Presence::required,
       {b, t, h, vd},
       beta_gate ? "only gdn2 has the write gate 'w'; this mixer takes 'beta' [B, T, H]" : "[B, T, H, V]"},
      spec.decay == ops::DecayKind::none
          ? DatasetRule{"g", Presence::forbidden, {}, "deltanet has no decay (gdn, kda and gdn2 take g)"}
      : spec.decay == ops::DecayKind::scalar
          ? DatasetRule{"g", Presence::required, {b, t, h}, "[B, T, H], one log decay per head"}
          : DatasetRule{"g", Presence::required, {b, t, h, k}, "[B, T, H, K], one log decay per key channel"},
  };
  for (const DatasetRule& rule : rules) file.check(rule);
  file.check_head_optionals(shape);

  // The layout is valid: read (checking the values), convert to the compute dtype, flatten tokens.
  const int64_t n = shape.num_tokens();
  auto read = [&](const char* name, Shape flat) {
    return file.read(name, compute, std::move(flat), std::string_view(name) == "g");
  };
  p.in.q = read("q", {n, h, k});
  p.in.k = read("k", {n, h, k});
  p.in.v = read("v", {n, h, vd});
  if (beta_gate) {
    p.in.beta = read("beta", {n, h});
  } else {
    p.in.b = read("b", {n, h, k});
    p.in.w = read("w", {n, h, vd});
  }
  if (spec.decay == ops::DecayKind::scalar) p.in.g = read("g", {n, h});
  if (spec.decay == ops::DecayKind::channel) p.in.g = read("g", {n, h, k});
  file.read_head_optionals(shape, compute, p.in.h0, p.d_o, p.dht);
  return p;
}

namespace {

constexpr const char* kHelp =
    R"(  --mixer  deltanet  no decay, scalar gate beta
           gdn       one log decay per head, beta
           kda       one log decay per key channel, beta
           gdn2      one log decay per key channel, erase gate b and write gate w instead of beta
  --impl   recurrent token by token, the reference; computed in f64
           chunked   the chunked (C = 64) training algorithm; computed in f32, as in training
           cuda      the chunked algorithm on the GPU (model/mixers/delta_rule/cuda/delta_rule.h): q, k,
                     v, the gates and do in --dtype, g, h0 and dht in f32, arithmetic in f32
  --dtype  f32 (default) or bf16: the GPU operands' dtype; only with --impl cuda

IN: f32 datasets (B batch, T tokens, H heads, K key dim, V value dim):
  q, k        [B, T, H, K]  used as given (normalise them beforehand); scale = 1/sqrt(K)
  v           [B, T, H, V]
  beta        [B, T, H]     deltanet, gdn, kda (not gdn2)
  b, w        [B, T, H, K] and [B, T, H, V]: gdn2 only
  g           log decay (≤ 0): [B, T, H] for gdn, [B, T, H, K] for kda and gdn2, absent for deltanet
  h0          [B, H, K, V]  initial state (optional: zeros)
  cu_seqlens  i64 [S + 1]   packed sequences (optional): then B = 1 and h0, dht are [S, H, K, V]
  do          [B, T, H, V]  dL/do (optional: zeros)
  dht         [B, H, K, V]  dL/dht (optional: zeros)
  Datasets with other names are ignored. A missing, misshapen or wrongly typed dataset, one the
  mixer does not take (beta for gdn2, b/w for the others, g for deltanet), a value that is not
  finite or a positive g is an error, and then nothing is written.

OUT: f32 datasets in the same layouts: o [B, T, H, V], ht (like h0), and the gradients of
  L = sum(o * do) + sum(ht * dht): dq, dk, dv, dbeta (gdn2: db, dw), dg (not deltanet), dh0.
  File attributes mixer, impl and compute_dtype say how OUT was made.
)";

// The problem on the GPU: token operands and do in `dtype`, g, h0 and dht in f32.
DeltaRuleFileProblem on_gpu(const DeltaRuleFileProblem& p, DType dtype) {
  DeltaRuleFileProblem g = p;
  for (Tensor* t : {&g.in.q, &g.in.k, &g.in.v, &g.in.beta, &g.in.b, &g.in.w, &g.d_o}) *t = to_gpu(*t, dtype);
  for (Tensor* t : {&g.in.g, &g.in.h0, &g.dht}) *t = to_gpu(*t, DType::f32);
  return g;
}

// Forward and backward of the problem; returns OUT's datasets in fla's layout, as f32.
// On the GPU (p already there) the gradients take their inputs' dtypes and the states are f32.
std::vector<std::pair<std::string, Tensor>> forward_backward(const DeltaRuleFileProblem& p, ops::DeltaRuleImpl impl) {
  const HeadProblemShape& shape = p.shape;
  const HeadRunBuffers b(shape, p.in.q);
  ops::delta_rule_forward(impl, p.spec, shape.seqs, p.in, b.o, b.ht);

  ops::DeltaRuleGrads grads;
  grads.dq = b.like(p.in.q), grads.dk = b.like(p.in.k), grads.dv = b.like(p.in.v);
  grads.dbeta = b.like(p.in.beta), grads.db = b.like(p.in.b), grads.dw = b.like(p.in.w), grads.dg = b.like(p.in.g);
  grads.dh0 = b.dh0;
  ops::delta_rule_backward(impl, p.spec, shape.seqs, p.in, p.d_o, p.dht, grads);

  // Tensors over tokens go back from [N, ...] to [B, T, ...]; states stay [S, H, K, V].
  auto tokens = [&](const Tensor& t) { return tokens_to_batch(t, shape.batch, shape.seq_len); };
  std::vector<std::pair<std::string, Tensor>> out = {{"o", tokens(b.o)},       {"ht", host_f32(b.ht)},
                                                     {"dq", tokens(grads.dq)}, {"dk", tokens(grads.dk)},
                                                     {"dv", tokens(grads.dv)}, {"dh0", host_f32(grads.dh0)}};
  for (const auto& [name, grad] :
       {std::pair{"dbeta", grads.dbeta}, {"db", grads.db}, {"dw", grads.dw}, {"dg", grads.dg}}) {
    if (grad.defined()) out.emplace_back(name, tokens(grad));
  }
  return out;
}

class DeltaRuleProblemFormat final : public MixerProblemFormat {
 public:
  std::string_view help() const override { return kHelp; }

  MixerRun run(const std::filesystem::path& in, std::string_view mixer, MixerImpl impl,
               DType gpu_dtype) const override {
    return run_head_problem(
        impl, gpu_dtype, [&](DType compute) { return read_delta_rule_problem(in, delta_rule_preset(mixer), compute); },
        on_gpu,
        [](const DeltaRuleFileProblem& p, bool recurrent) {
          return forward_backward(p, recurrent ? ops::DeltaRuleImpl::recurrent : ops::DeltaRuleImpl::chunked);
        });
  }
};

}  // namespace

const MixerProblemFormat& delta_rule_problem_format() {
  static const DeltaRuleProblemFormat format;
  return format;
}

}  // namespace linea

// Host side of the CUDA gated-linear-attention family: the call, its chunk table and workspaces
// (one scratch request per call) and the order of the kernels (model/mixers/gla/cuda/gla_kernels.cuh).
#include <cstdint>
#include <vector>

#include "kernels/cuda/scratch.h"
#include "model/mixers/delta_rule/cuda/delta_rule_bf16.h"
#include "model/mixers/gla/cuda/gla.h"
#include "model/mixers/gla/cuda/gla_kernels.cuh"

namespace linea::cuda {

namespace gla {
namespace {

const float* f32_or_null(const Tensor& t) { return t.defined() ? static_cast<const float*>(t.raw()) : nullptr; }
float* f32_or_null(Tensor& t) { return t.defined() ? static_cast<float*>(t.raw()) : nullptr; }

Call describe_call(const ops::GlaSpec& spec, const ops::GlaInputs& in) {
  Call c{};
  c.q = in.q.raw();
  c.k = in.k.defined() ? in.k.raw() : nullptr;
  c.v = in.v.raw();
  c.g = f32_or_null(in.g);
  c.u = f32_or_null(in.u);
  c.heads = static_cast<int>(in.q.dim(1));
  c.key_dim = static_cast<int>(in.q.dim(2));
  c.value_dim = static_cast<int>(in.v.dim(2));
  c.scale = static_cast<float>(spec.scale);
  c.decay = spec.decay;
  c.tied = spec.key == ops::GlaKey::one_minus_decay;
  c.bonus = spec.readout == ops::GlaReadout::before_write_bonus;
  c.bf16 = in.q.dtype() == DType::bf16;
  return c;
}

// The call with its chunk table on the device, and the workspaces: G (f64) and P always; h, dh, dP and
// (with the bonus) du_parts for the backward.
struct Plan {
  Call call;
  Workspace ws{};

  Plan(const ops::GlaSpec& spec, const SeqLayout& seqs, const ops::GlaInputs& in, bool backward)
      : call(describe_call(spec, in)) {
    const std::vector<int64_t> table = delta::chunk_table(seqs);
    const int64_t chunks = (static_cast<int64_t>(table.size()) - seqs.num_seqs() - 1) / 2;
    const size_t f = sizeof(float), heads = static_cast<size_t>(call.heads);
    const size_t tokens = static_cast<size_t>(in.q.dim(0));
    const size_t tiles = static_cast<size_t>(chunks) * heads * kC * kC;
    const size_t states = static_cast<size_t>(chunks) * heads * call.key_dim * call.value_dim;
    const size_t parts = call.bonus ? static_cast<size_t>(chunks) * heads * call.key_dim : 0;
    std::vector<size_t> sizes = {table.size() * sizeof(int64_t), tokens * heads * decay_width(call) * sizeof(double),
                                 tiles * f};
    if (backward) {
      for (size_t n : {states, states, tiles, parts}) sizes.push_back(n * f);
    }
    const std::vector<void*> p = scratch(sizes);
    call.chunks = delta::place_chunk_table(table, seqs.num_seqs(), p[0]);
    const auto at = [&](size_t i) { return i < p.size() ? static_cast<float*>(p[i]) : nullptr; };
    ws = {static_cast<double*>(p[1]), at(2), backward ? at(3) : nullptr, at(4), at(5), call.bonus ? at(6) : nullptr};
  }
};

// The delta rule's bf16 tensor-core pipeline takes the bf16 calls with a given key, the after-write
// readout and a decay per token (Mamba-2) or per head (RetNet: g [H], a scalar decay of token
// stride 0) as its plain write. The pipeline also runs a decay per channel (GLA), but its dg misses
// the family's bf16 limit there (err_ratio 0.0088 against 0.005 on the H200, 2026-12-03), so GLA,
// HGRN-2 and RWKV-6 stay on the kernels of gla_kernels.cuh.
ops::DeltaRuleSpec plain_spec(const ops::GlaSpec& spec) {
  return {ops::DecayKind::scalar, ops::GateKind::beta, spec.scale};
}
ops::DeltaRuleInputs plain_inputs(const ops::GlaInputs& in) {
  ops::DeltaRuleInputs d;
  d.q = in.q, d.k = in.k, d.v = in.v, d.g = in.g, d.h0 = in.h0;
  return d;
}
bool plain_takes(const ops::GlaSpec& spec, const ops::GlaInputs& in, std::initializer_list<const Tensor*> tensors) {
  return in.q.dtype() == DType::bf16 && spec.key == ops::GlaKey::given && spec.decay != ops::GlaDecay::channel &&
         spec.readout == ops::GlaReadout::after_write &&
         delta::bf16_takes(plain_spec(spec), plain_inputs(in), tensors, delta::Write::plain);
}

}  // namespace
}  // namespace gla

void gla_forward(const ops::GlaSpec& spec, const SeqLayout& seqs, const ops::GlaInputs& in, Tensor o, Tensor ht) {
  if (gla::plain_takes(spec, in, {&o})) {
    return delta::bf16_forward(gla::plain_spec(spec), seqs, gla::plain_inputs(in), o, ht, nullptr, delta::Write::plain);
  }
  const gla::Plan plan(spec, seqs, in, false);
  gla::cumulate(plan.call, plan.ws);
  gla::gram(plan.call, plan.ws);
  gla::state_forward(plan.call, plan.ws, gla::f32_or_null(in.h0), gla::f32_or_null(ht), o.raw());
}

void gla_backward(const ops::GlaSpec& spec, const SeqLayout& seqs, const ops::GlaInputs& in, const Tensor& d_o,
                  const Tensor& dht, ops::GlaGrads& grads) {
  if (gla::plain_takes(spec, in, {&d_o, &grads.dq, &grads.dk, &grads.dv})) {
    ops::DeltaRuleGrads g;
    g.dq = grads.dq, g.dk = grads.dk, g.dv = grads.dv, g.dg = grads.dg, g.dh0 = grads.dh0;
    return delta::bf16_backward(gla::plain_spec(spec), seqs, gla::plain_inputs(in), d_o, dht, g, nullptr,
                                delta::Write::plain);
  }
  const gla::Plan plan(spec, seqs, in, true);
  const gla::Call& c = plan.call;
  gla::cumulate(c, plan.ws);
  gla::gram(c, plan.ws);
  gla::state_forward(c, plan.ws, gla::f32_or_null(in.h0), nullptr, nullptr);
  gla::state_backward(c, plan.ws, d_o.raw(), gla::f32_or_null(dht), gla::f32_or_null(grads.dh0));
  gla::output_gram(c, plan.ws, d_o.raw());
  gla::value_gradient(c, plan.ws, d_o.raw(), grads.dv.raw());
  const gla::Outputs out{grads.dq.raw(), grads.dk.defined() ? grads.dk.raw() : nullptr, grads.dv.raw(),
                         gla::f32_or_null(grads.dg), gla::f32_or_null(grads.du)};
  gla::key_gradients(c, plan.ws, d_o.raw(), out);
  if (out.du) gla::bonus_gradient(c, plan.ws, out.du);
}

}  // namespace linea::cuda

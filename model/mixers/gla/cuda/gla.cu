// Host side of the CUDA gated-linear-attention family: the call, its chunk table and workspaces
// (one scratch request per call) and the order of the kernels (model/mixers/gla/cuda/gla_kernels.cuh).
#include <cstdint>
#include <vector>

#include "kernels/cuda/scratch.h"
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

}  // namespace
}  // namespace gla

void gla_forward(const ops::GlaSpec& spec, const SeqLayout& seqs, const ops::GlaInputs& in, Tensor o, Tensor ht) {
  const gla::Plan plan(spec, seqs, in, false);
  gla::cumulate(plan.call, plan.ws);
  gla::gram(plan.call, plan.ws);
  gla::state_forward(plan.call, plan.ws, gla::f32_or_null(in.h0), gla::f32_or_null(ht), o.raw());
}

void gla_backward(const ops::GlaSpec& spec, const SeqLayout& seqs, const ops::GlaInputs& in, const Tensor& d_o,
                  const Tensor& dht, ops::GlaGrads& grads) {
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

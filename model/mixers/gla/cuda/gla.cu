// Host side of the CUDA gated-linear-attention family: the call, its chunk table and workspaces
// (one scratch request per call) and the order of the kernels (model/mixers/gla/cuda/gla_kernels.cuh).
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/scratch.h"
#include "model/mixers/delta_rule/cuda/delta_rule_bf16.h"
#include "model/mixers/gla/cuda/gla.h"
#include "model/mixers/gla/cuda/gla_kernels.cuh"

namespace linea::cuda {

namespace gla {

namespace {
const float* f32_or_null(const Tensor& t) { return t.defined() ? static_cast<const float*>(t.raw()) : nullptr; }
float* f32_or_null(Tensor& t) { return t.defined() ? static_cast<float*>(t.raw()) : nullptr; }
}  // namespace

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

namespace {

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

// The delta rule's bf16 tensor-core pipeline takes the bf16 calls as its plain write: with the
// after-write readout a decay per channel (GLA, HGRN-2), per token (Mamba-2) or per head (RetNet: g
// [H], a scalar decay of token stride 0); with RWKV-6's before-write bonus readout a decay per
// channel and a given key (delta::Bonus: u, du). HGRN-2's key k = 1 − exp(g) is written out for it
// in bf16 (tied_keys), and its share of dg added afterwards: ∂k/∂g = −exp(g), so dg += −exp(g) ⊙ dk
// (add_tied_key_gradient). The calls it does not take (f32; K or V not a multiple of 8, K > 256,
// V > 512, unaligned token tensors) run on gla_kernels.cuh.
ops::DeltaRuleSpec plain_spec(const ops::GlaSpec& spec) {
  const ops::DecayKind decay = spec.decay == ops::GlaDecay::channel ? ops::DecayKind::channel : ops::DecayKind::scalar;
  return {decay, ops::GateKind::beta, spec.scale};
}
ops::DeltaRuleInputs plain_inputs(const ops::GlaInputs& in, const Tensor& k) {
  ops::DeltaRuleInputs d;
  d.q = in.q, d.k = k, d.v = in.v, d.g = in.g, d.h0 = in.h0;
  return d;
}
// A tied key is written out 16-byte aligned in the shape of q: q stands in for it where only its
// shape and alignment count.
const Tensor& key_or_stand_in(const ops::GlaSpec& spec, const ops::GlaInputs& in) {
  return spec.key == ops::GlaKey::given ? in.k : in.q;
}
bool plain_takes(const ops::GlaSpec& spec, const ops::GlaInputs& in, std::initializer_list<const Tensor*> tensors) {
  const bool readout = spec.readout == ops::GlaReadout::after_write ||
                       (spec.decay == ops::GlaDecay::channel && spec.key == ops::GlaKey::given);
  return in.q.dtype() == DType::bf16 && readout &&
         delta::bf16_takes(plain_spec(spec), plain_inputs(in, key_or_stand_in(spec, in)), tensors, delta::Write::plain);
}

// A saved buffer's refusal: only the tensor-core pipeline saves (delta::bf16_saved_memory).
constexpr const char* kSavedRefusal =
    "only a bf16 call on the tensor-core pipeline (gla_saved_bytes > 0) saves its intermediates, into 256-byte "
    "aligned memory";
// The bonus of RWKV-6's readout (undefined tensors with the after-write readout).
delta::Bonus plain_bonus(const ops::GlaSpec& spec, const ops::GlaInputs& in, const ops::GlaGrads* grads) {
  if (spec.readout != ops::GlaReadout::before_write_bonus) return {};
  return {in.u, grads ? grads->du : Tensor()};
}

// k = 1 − exp(g) = −expm1(g) (exact for small |g|), rounded to bf16; n = N·H·K entries.
__global__ void tied_keys_kernel(int64_t n, const float* g, __nv_bfloat16* k) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    k[i] = __float2bfloat16_rn(-expm1f(g[i]));
  }
}
// dg += −exp(g) ⊙ dk.
__global__ void add_tied_key_gradient_kernel(int64_t n, const float* g, const __nv_bfloat16* dk, float* dg) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    dg[i] -= expf(g[i]) * __bfloat162float(dk[i]);
  }
}

// The key the pipeline reads (the given one, or HGRN-2's tied key written out) and, for a tied key,
// a place for its gradient: level-1 scratch, kept across the pipeline's own (level 0).
struct PlainKey {
  Tensor k, dk;
  PlainKey(const ops::GlaSpec& spec, const ops::GlaInputs& in, bool backward) {
    if (spec.key == ops::GlaKey::given) {
      k = in.k;
      return;
    }
    const size_t bytes = static_cast<size_t>(in.q.numel()) * sizeof(__nv_bfloat16);
    const std::vector<void*> p = scratch(backward ? std::vector<size_t>{bytes, bytes} : std::vector<size_t>{bytes}, 1);
    k = Tensor::view(p[0], in.q.shape(), DType::bf16, Device::cuda);
    if (backward) dk = Tensor::view(p[1], in.q.shape(), DType::bf16, Device::cuda);
    const int64_t n = k.numel();
    tied_keys_kernel<<<grid_stride_blocks(n), kThreadsPerBlock>>>(n, f32_or_null(in.g),
                                                                  static_cast<__nv_bfloat16*>(k.raw()));
    check_launch("gla tied_keys_kernel");
  }
};

}  // namespace
}  // namespace gla

size_t gla_saved_bytes(const ops::GlaSpec& spec, const SeqLayout& seqs, const ops::GlaInputs& in) {
  if (!gla::plain_takes(spec, in, {})) return 0;
  return delta::bf16_saved_bytes(gla::plain_spec(spec), seqs, gla::plain_inputs(in, gla::key_or_stand_in(spec, in)),
                                 delta::Write::plain);
}

void gla_forward(const ops::GlaSpec& spec, const SeqLayout& seqs, const ops::GlaInputs& in, Tensor o, Tensor ht,
                 Tensor saved) {
  const bool plain = gla::plain_takes(spec, in, {&o});
  void* const keep = delta::bf16_saved_memory(saved, plain, "gla_forward", gla::kSavedRefusal);
  if (plain) {
    const gla::PlainKey key(spec, in, false);
    return delta::bf16_forward(gla::plain_spec(spec), seqs, gla::plain_inputs(in, key.k), o, ht, keep,
                               delta::Write::plain, gla::plain_bonus(spec, in, nullptr));
  }
  const gla::Plan plan(spec, seqs, in, false);
  gla::cumulate(plan.call, plan.ws);
  gla::gram(plan.call, plan.ws);
  gla::state_forward(plan.call, plan.ws, gla::f32_or_null(in.h0), gla::f32_or_null(ht), o.raw());
}

void gla_backward(const ops::GlaSpec& spec, const SeqLayout& seqs, const ops::GlaInputs& in, const Tensor& d_o,
                  const Tensor& dht, ops::GlaGrads& grads, const Tensor& saved) {
  const bool plain = gla::plain_takes(spec, in, {&d_o, &grads.dq, &grads.dk, &grads.dv});
  const void* const kept = delta::bf16_saved_memory(saved, plain, "gla_backward", gla::kSavedRefusal);
  if (plain) {
    const gla::PlainKey key(spec, in, true);
    const bool tied = key.dk.defined();  // (its dg is defined: the key's only gradient)
    ops::DeltaRuleGrads g;
    g.dq = grads.dq, g.dk = tied ? key.dk : grads.dk, g.dv = grads.dv, g.dg = grads.dg, g.dh0 = grads.dh0;
    delta::bf16_backward(gla::plain_spec(spec), seqs, gla::plain_inputs(in, key.k), d_o, dht, g, kept,
                         delta::Write::plain, gla::plain_bonus(spec, in, &grads));
    if (tied) {
      const int64_t n = key.k.numel();
      gla::add_tied_key_gradient_kernel<<<grid_stride_blocks(n), kThreadsPerBlock>>>(
          n, gla::f32_or_null(in.g), static_cast<const __nv_bfloat16*>(g.dk.raw()), gla::f32_or_null(grads.dg));
      check_launch("gla add_tied_key_gradient_kernel");
    }
    return;
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

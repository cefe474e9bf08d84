// Checks the gated-linear-attention arguments and dispatches to the CPU kernels
// (model/mixers/gla/cpu/gla_*) or, for tensors on a CUDA device, to model/mixers/gla/cuda/gla.h.
#include "model/mixers/gla/gla.h"

#include <string>
#include <vector>

#include "kernels/head_mixer_dims.h"
#include "kernels/mixer_dtypes.h"
#include "kernels/op_arguments.h"
#include "model/mixers/gla/cpu/gla_chunked.h"
#include "model/mixers/gla/cpu/gla_recurrent.h"
#ifdef LINEA_WITH_CUDA
#include "model/mixers/gla/cuda/gla.h"
#endif

namespace linea::ops {

namespace {

using Dims = HeadMixerDims;

#ifdef LINEA_WITH_CUDA
constexpr int64_t kMaxCudaKeyDim = cuda::kGlaMaxKeyDim;
#else
constexpr int64_t kMaxCudaKeyDim = 0;  // no CUDA tensor passes mixer_dtypes in this build
#endif

Shape decay_shape(const GlaSpec& spec, const Dims& d) {
  switch (spec.decay) {
    case GlaDecay::channel: return {d.tokens, d.heads, d.key_dim};
    case GlaDecay::scalar: return {d.tokens, d.heads};
    case GlaDecay::head: return {d.heads};
  }
  return {};
}

// One side of the op: the inputs q, k, v, g, u, h0, or their gradients, named with the prefix "d".
// Which must be defined follows the spec (`gradients`: g has no gradient for a fixed decay).
struct OperandSet {
  const Tensor &q, &k, &v, &g, &u, &h0;
};

void check_operand_set(OpArguments& args, const GlaSpec& spec, const Dims& d, const MixerDtypes& x, const OperandSet& s,
                       const std::string& prefix, bool gradients) {
  args.typed(s.q, prefix + "q", {d.tokens, d.heads, d.key_dim}, x.operand);
  if (spec.key == GlaKey::given) {
    args.typed(s.k, prefix + "k", {d.tokens, d.heads, d.key_dim}, x.operand);
  } else {
    args.absent(s.k, prefix + "k", "when the key is tied to the decay (k = 1 − exp(g))");
  }
  args.typed(s.v, prefix + "v", {d.tokens, d.heads, d.value_dim}, x.operand);
  if (gradients && spec.decay == GlaDecay::head) {
    args.absent(s.g, prefix + "g", "for a fixed per-head decay (it has no gradient)");
  } else {
    args.typed(s.g, prefix + "g", decay_shape(spec, d), x.gate);
  }
  if (spec.readout == GlaReadout::before_write_bonus) {
    args.typed(s.u, prefix + "u", {d.heads, d.key_dim}, x.gate);
  } else {
    args.absent(s.u, prefix + "u", "without the bonus readout");
  }
  args.optional_typed(s.h0, prefix + "h0", {d.seqs, d.heads, d.key_dim, d.value_dim}, x.gate);
}

Dims check_inputs(OpArguments& args, const std::string& op, const GlaSpec& spec, const SeqLayout& seqs,
                  const GlaInputs& in, MixerDtypes& x) {
  const Dims d = check_head_mixer_dims(args, op, in.q, in.v, seqs, kMaxCudaKeyDim, x);
  args.require(spec.key == GlaKey::given || spec.decay == GlaDecay::channel, "spec",
               "a key tied to the decay (k = 1 − exp(g)) needs a per-channel decay");
  check_operand_set(args, spec, d, x, {in.q, in.k, in.v, in.g, in.u, in.h0}, "", false);
  return d;
}

template <class T>
cpu::GlaOperands<T> operands(const GlaSpec& spec, const GlaInputs& in, const Dims& d) {
  using Rows = cpu::Rows<const T>;
  cpu::GlaOperands<T> x;
  view_head_operands<T>(x, d, spec.scale, in.q, in.k, in.v, in.h0);
  x.spec = spec;
  const T* g = in.g.data<T>();
  switch (spec.decay) {
    case GlaDecay::channel: x.log_decay = Rows::dense(g, d.heads, d.key_dim); break;
    case GlaDecay::scalar: x.log_decay = Rows::broadcast(g, d.heads); break;
    case GlaDecay::head: x.log_decay = Rows::per_head(g); break;
  }
  if (in.u.defined()) x.u = in.u.data<T>();
  return x;
}

// Zeroes the gradients (the kernels accumulate) and views them like the inputs; du_parts is the
// per-(sequence, head) scratch of du (cpu::sum_bonus_parts).
template <class T>
cpu::GlaGradients<T> gradients(const GlaSpec& spec, GlaGrads& g, const Dims& d, std::vector<T>& du_parts) {
  using Rows = cpu::Rows<T>;
  cpu::GlaGradients<T> x;
  for (Tensor* t : {&g.dq, &g.dk, &g.dv, &g.dg, &g.du, &g.dh0}) {
    if (t->defined()) t->zero();
  }
  view_head_gradients<T>(x, d, g.dq, g.dk, g.dv, g.dh0);
  if (spec.decay == GlaDecay::channel) x.dlog_decay = Rows::dense(g.dg.data<T>(), d.heads, d.key_dim);
  if (spec.decay == GlaDecay::scalar) x.dlog_decay = Rows::broadcast(g.dg.data<T>(), d.heads);
  if (g.du.defined()) {
    du_parts.assign(static_cast<size_t>(d.seqs * d.heads * d.key_dim), T(0));
    x.du_parts = du_parts.data();
  }
  return x;
}

}  // namespace

size_t gla_saved_bytes(const GlaSpec& spec, const SeqLayout& seqs, const GlaInputs& in) {
#ifdef LINEA_WITH_CUDA
  if (in.q.defined() && in.q.device() == Device::cuda) return cuda::gla_saved_bytes(spec, seqs, in);
#else
  (void)spec, (void)seqs, (void)in;
#endif
  return 0;
}

void gla_forward(GlaImpl impl, const GlaSpec& spec, const SeqLayout& seqs, const GlaInputs& in, Tensor o, Tensor ht,
                 Tensor saved) {
  const std::string op = "gla_forward";
  OpArguments args(op);
  MixerDtypes x;
  const Dims d = check_inputs(args, op, spec, seqs, in, x);
  args.typed(o, "o", {d.tokens, d.heads, d.value_dim}, x.operand);
  args.optional_typed(ht, "ht", {d.seqs, d.heads, d.key_dim, d.value_dim}, x.gate);
  args.saved_buffer(saved, saved.defined() ? gla_saved_bytes(spec, seqs, in) : 0, "gla_saved_bytes");
#ifdef LINEA_WITH_CUDA
  if (x.device == Device::cuda && impl == GlaImpl::recurrent) {
    args.require(!saved.defined(), "saved", "the recurrent CUDA kernel saves nothing; leave it undefined");
    return cuda::gla_recurrent_forward(spec, seqs, in, o, ht);
  }
  if (x.device == Device::cuda) return cuda::gla_forward(spec, seqs, in, o, ht, saved);
#endif
  dispatch_cpu(x.operand, [&](auto zero) {
    using T = decltype(zero);
    const cpu::GlaOperands<T> x = operands<T>(spec, in, d);
    T* ht_data = ht.defined() ? ht.data<T>() : nullptr;
    if (impl == GlaImpl::recurrent) {
      cpu::gla_recurrent_forward(x, seqs, o.data<T>(), ht_data);
    } else {
      cpu::gla_chunked_forward(x, seqs, o.data<T>(), ht_data);
    }
  });
}

void gla_backward(GlaImpl impl, const GlaSpec& spec, const SeqLayout& seqs, const GlaInputs& in, const Tensor& d_o,
                  const Tensor& dht, GlaGrads& grads, const Tensor& saved) {
  const std::string op = "gla_backward";
  OpArguments args(op);
  MixerDtypes x;
  const Dims d = check_inputs(args, op, spec, seqs, in, x);
  args.typed(d_o, "d_o", {d.tokens, d.heads, d.value_dim}, x.operand);
  args.optional_typed(dht, "dht", {d.seqs, d.heads, d.key_dim, d.value_dim}, x.gate);
  args.saved_buffer(saved, saved.defined() ? gla_saved_bytes(spec, seqs, in) : 0, "gla_saved_bytes");
  check_operand_set(args, spec, d, x, {grads.dq, grads.dk, grads.dv, grads.dg, grads.du, grads.dh0}, "d", true);
#ifdef LINEA_WITH_CUDA
  if (x.device == Device::cuda) return cuda::gla_backward(spec, seqs, in, d_o, dht, grads, saved);
#endif
  dispatch_cpu(x.operand, [&](auto zero) {
    using T = decltype(zero);
    const cpu::GlaOperands<T> x = operands<T>(spec, in, d);
    std::vector<T> du_parts;
    const cpu::GlaGradients<T> dx = gradients<T>(spec, grads, d, du_parts);
    const T* dht_data = dht.defined() ? dht.data<T>() : nullptr;
    if (impl == GlaImpl::recurrent) {
      cpu::gla_recurrent_backward(x, seqs, d_o.data<T>(), dht_data, dx);
    } else {
      cpu::gla_chunked_backward(x, seqs, d_o.data<T>(), dht_data, dx);
    }
    if (grads.du.defined()) cpu::sum_bonus_parts(du_parts, d.seqs, d.heads, d.key_dim, grads.du.data<T>());
  });
}

}  // namespace linea::ops

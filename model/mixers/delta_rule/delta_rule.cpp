// Checks the delta-rule arguments and dispatches to the CPU kernels (model/mixers/delta_rule/cpu/delta_rule_*) or,
// for tensors on a CUDA device, to model/mixers/delta_rule/cuda/delta_rule.h (chunked; the recurrent forward).
#include "model/mixers/delta_rule/delta_rule.h"

#include <string>

#include "kernels/head_mixer_dims.h"
#include "kernels/mixer_dtypes.h"
#include "kernels/op_arguments.h"
#include "model/mixers/delta_rule/cpu/delta_rule_chunked.h"
#include "model/mixers/delta_rule/cpu/delta_rule_recurrent.h"
#ifdef LINEA_WITH_CUDA
#include "model/mixers/delta_rule/cuda/delta_rule.h"
#endif

namespace linea::ops {

namespace {

using Dims = HeadMixerDims;

// The largest key dimension of the CUDA kernels (model/mixers/delta_rule/cuda/delta_rule_chunk.cuh).
constexpr int64_t kMaxCudaKeyDim = 256;

Shape decay_shape(const DeltaRuleSpec& spec, const Dims& d) {
  if (spec.decay == DecayKind::scalar) return {d.tokens, d.heads};
  return {d.tokens, d.heads, d.key_dim};
}

// One side of the op: the inputs q, k, v, beta, b, w, g, h0, or their gradients, named with the
// prefix "d". Which must be defined follows the spec; h0 (dh0) is optional.
struct OperandSet {
  const Tensor &q, &k, &v, &beta, &b, &w, &g, &h0;
};

void check_operand_set(OpArguments& args, const DeltaRuleSpec& spec, const Dims& d, const MixerDtypes& x,
                       const OperandSet& s, const std::string& prefix) {
  const DType dtype = x.operand;
  args.typed(s.q, prefix + "q", {d.tokens, d.heads, d.key_dim}, dtype)
      .typed(s.k, prefix + "k", {d.tokens, d.heads, d.key_dim}, dtype)
      .typed(s.v, prefix + "v", {d.tokens, d.heads, d.value_dim}, dtype);
  if (spec.gate == GateKind::beta) {
    args.typed(s.beta, prefix + "beta", {d.tokens, d.heads}, dtype)
        .absent(s.b, prefix + "b", "for GateKind::beta")
        .absent(s.w, prefix + "w", "for GateKind::beta");
  } else {
    args.typed(s.b, prefix + "b", {d.tokens, d.heads, d.key_dim}, dtype)
        .typed(s.w, prefix + "w", {d.tokens, d.heads, d.value_dim}, dtype)
        .absent(s.beta, prefix + "beta", "for GateKind::erase_write");
  }
  if (spec.decay == DecayKind::none) {
    args.absent(s.g, prefix + "g", "for DecayKind::none");
  } else {
    args.typed(s.g, prefix + "g", decay_shape(spec, d), x.gate);
  }
  args.optional_typed(s.h0, prefix + "h0", {d.seqs, d.heads, d.key_dim, d.value_dim}, x.gate);
}

Dims check_inputs(OpArguments& args, const std::string& op, const DeltaRuleSpec& spec, const SeqLayout& seqs,
                  const DeltaRuleInputs& in, MixerDtypes& x) {
  const Dims d = check_head_mixer_dims(args, op, in.q, in.v, seqs, kMaxCudaKeyDim, x);
  check_operand_set(args, spec, d, x, {in.q, in.k, in.v, in.beta, in.b, in.w, in.g, in.h0}, "");
  return d;
}

template <class T>
cpu::DeltaRuleOperands<T> operands(const DeltaRuleSpec& spec, const DeltaRuleInputs& in, const Dims& d) {
  using Rows = cpu::Rows<const T>;
  cpu::DeltaRuleOperands<T> x;
  view_head_operands<T>(x, d, spec.scale, in.q, in.k, in.v, in.h0);
  x.decay = spec.decay;
  x.gate = spec.gate;
  if (spec.gate == GateKind::beta) {
    x.erase = x.write = Rows::broadcast(in.beta.data<T>(), d.heads);
  } else {
    x.erase = Rows::dense(in.b.data<T>(), d.heads, d.key_dim);
    x.write = Rows::dense(in.w.data<T>(), d.heads, d.value_dim);
  }
  if (spec.decay == DecayKind::scalar) x.log_decay = Rows::broadcast(in.g.data<T>(), d.heads);
  if (spec.decay == DecayKind::channel) x.log_decay = Rows::dense(in.g.data<T>(), d.heads, d.key_dim);
  return x;
}

// Zeroes the gradients (the kernels accumulate) and views them like the inputs.
template <class T>
cpu::DeltaRuleGradients<T> gradients(const DeltaRuleSpec& spec, DeltaRuleGrads& g, const Dims& d) {
  using Rows = cpu::Rows<T>;
  cpu::DeltaRuleGradients<T> x;
  for (Tensor* t : {&g.dq, &g.dk, &g.dv, &g.dbeta, &g.db, &g.dw, &g.dg, &g.dh0}) {
    if (t->defined()) t->zero();
  }
  view_head_gradients<T>(x, d, g.dq, g.dk, g.dv, g.dh0);
  if (spec.gate == GateKind::beta) {
    x.derase = x.dwrite = Rows::broadcast(g.dbeta.data<T>(), d.heads);
  } else {
    x.derase = Rows::dense(g.db.data<T>(), d.heads, d.key_dim);
    x.dwrite = Rows::dense(g.dw.data<T>(), d.heads, d.value_dim);
  }
  if (spec.decay == DecayKind::scalar) x.dlog_decay = Rows::broadcast(g.dg.data<T>(), d.heads);
  if (spec.decay == DecayKind::channel) x.dlog_decay = Rows::dense(g.dg.data<T>(), d.heads, d.key_dim);
  return x;
}

template <class T>
void forward(DeltaRuleImpl impl, const DeltaRuleSpec& spec, const SeqLayout& seqs, const DeltaRuleInputs& in,
             const Dims& d, Tensor& o, Tensor& ht, Tensor& r) {
  const cpu::DeltaRuleOperands<T> x = operands<T>(spec, in, d);
  T* ht_data = ht.defined() ? ht.data<T>() : nullptr;
  T* r_data = r.defined() ? r.data<T>() : nullptr;
  if (impl == DeltaRuleImpl::recurrent) {
    cpu::delta_rule_recurrent_forward(x, seqs, o.data<T>(), ht_data, r_data);
  } else {
    cpu::delta_rule_chunked_forward(x, seqs, o.data<T>(), ht_data, r_data);
  }
}

template <class T>
void backward(DeltaRuleImpl impl, const DeltaRuleSpec& spec, const SeqLayout& seqs, const DeltaRuleInputs& in,
              const Dims& d, const Tensor& d_o, const Tensor& dht, const Tensor& dr, DeltaRuleGrads& grads) {
  const cpu::DeltaRuleOperands<T> x = operands<T>(spec, in, d);
  const cpu::DeltaRuleGradients<T> dx = gradients<T>(spec, grads, d);
  const T* dht_data = dht.defined() ? dht.data<T>() : nullptr;
  const T* dr_data = dr.defined() ? dr.data<T>() : nullptr;
  if (impl == DeltaRuleImpl::recurrent) {
    cpu::delta_rule_recurrent_backward(x, seqs, d_o.data<T>(), dht_data, dr_data, dx);
  } else {
    cpu::delta_rule_chunked_backward(x, seqs, d_o.data<T>(), dht_data, dr_data, dx);
  }
}

}  // namespace

size_t delta_rule_saved_bytes(const DeltaRuleSpec& spec, const SeqLayout& seqs, const DeltaRuleInputs& in) {
#ifdef LINEA_WITH_CUDA
  if (in.q.defined() && in.q.device() == Device::cuda) return cuda::delta_rule_saved_bytes(spec, seqs, in);
#else
  (void)spec, (void)seqs, (void)in;
#endif
  return 0;
}

void delta_rule_forward(DeltaRuleImpl impl, const DeltaRuleSpec& spec, const SeqLayout& seqs, const DeltaRuleInputs& in,
                        Tensor o, Tensor ht, Tensor r, Tensor saved) {
  const std::string op = "delta_rule_forward";
  OpArguments args(op);
  MixerDtypes x;
  const Dims d = check_inputs(args, op, spec, seqs, in, x);
  args.typed(o, "o", {d.tokens, d.heads, d.value_dim}, x.operand)
      .optional_typed(ht, "ht", {d.seqs, d.heads, d.key_dim, d.value_dim}, x.gate)
      .optional_typed(r, "r", {d.tokens, d.heads, d.value_dim}, x.operand);
  args.saved_buffer(saved, saved.defined() ? delta_rule_saved_bytes(spec, seqs, in) : 0, "delta_rule_saved_bytes");
#ifdef LINEA_WITH_CUDA
  if (x.device == Device::cuda && impl == DeltaRuleImpl::recurrent) {
    args.require(!r.defined(), "r", "the recurrent CUDA kernel does not form the write error; use chunked");
    args.require(!saved.defined(), "saved", "the recurrent CUDA kernel saves nothing; leave it undefined");
    return cuda::delta_rule_recurrent_forward(spec, seqs, in, o, ht);
  }
  if (x.device == Device::cuda) return cuda::delta_rule_forward(spec, seqs, in, o, ht, r, saved);
#endif
  dispatch_cpu(x.operand, [&](auto zero) { forward<decltype(zero)>(impl, spec, seqs, in, d, o, ht, r); });
}

void delta_rule_backward(DeltaRuleImpl impl, const DeltaRuleSpec& spec, const SeqLayout& seqs,
                         const DeltaRuleInputs& in, const Tensor& d_o, const Tensor& dht, DeltaRuleGrads& grads,
                         const Tensor& dr, const Tensor& saved) {
  const std::string op = "delta_rule_backward";
  OpArguments args(op);
  MixerDtypes x;
  const Dims d = check_inputs(args, op, spec, seqs, in, x);
  args.require(x.device != Device::cuda || impl == DeltaRuleImpl::chunked, "impl",
               "the recurrent backward has no CUDA implementation; use chunked");
  const DType dtype = x.operand;
  args.typed(d_o, "d_o", {d.tokens, d.heads, d.value_dim}, dtype)
      .optional_typed(dht, "dht", {d.seqs, d.heads, d.key_dim, d.value_dim}, x.gate)
      .optional_typed(dr, "dr", {d.tokens, d.heads, d.value_dim}, dtype);
  args.saved_buffer(saved, saved.defined() ? delta_rule_saved_bytes(spec, seqs, in) : 0, "delta_rule_saved_bytes");
  check_operand_set(args, spec, d, x,
                    {grads.dq, grads.dk, grads.dv, grads.dbeta, grads.db, grads.dw, grads.dg, grads.dh0}, "d");
#ifdef LINEA_WITH_CUDA
  if (x.device == Device::cuda) return cuda::delta_rule_backward(spec, seqs, in, d_o, dht, grads, dr, saved);
#endif
  dispatch_cpu(dtype, [&](auto zero) { backward<decltype(zero)>(impl, spec, seqs, in, d, d_o, dht, dr, grads); });
}

}  // namespace linea::ops

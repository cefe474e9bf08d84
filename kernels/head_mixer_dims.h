// The first checks of a head mixer's call (the delta rule, the gated-linear-attention family), whose
// token operands are q: [N, H, K] and v: [N, H, V] over the S sequences of a layout: q and v are
// defined and 3-D, their dtypes are the mixer's (mixer_dtypes of q, which sets `x`), H, K, V ≥ 1,
// K ≤ max_cuda_key_dim for CUDA tensors, and seqs is a layout of the N tokens. Each failure throws
// std::invalid_argument "OP: NAME: expected …" (kernels/op_arguments.h). And the views of those
// operands (and their gradients) that every head mixer's CPU kernels take alike.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/chunk/cpu/blocks.h"
#include "kernels/mixer_dtypes.h"
#include "kernels/op_arguments.h"
#include "kernels/seq_layout.h"
#include "kernels/tensor.h"

namespace linea::ops {

struct HeadMixerDims {
  int64_t tokens = 0, heads = 0, key_dim = 0, value_dim = 0, seqs = 0;
};

HeadMixerDims check_head_mixer_dims(OpArguments& args, const std::string& op, const Tensor& q, const Tensor& v,
                                    const SeqLayout& seqs, int64_t max_cuda_key_dim, MixerDtypes& x);

// Sets what every head mixer's CPU operands (cpu::DeltaRuleOperands, cpu::GlaOperands) hold alike:
// H, K, V and the scale; q and k [N, H, K] and v [N, H, V] as dense rows of T, h0 [S, H, K, V].
// An undefined k (GLA's key tied to the decay) or h0 (zeros) is left unset.
template <class T, class Operands>
void view_head_operands(Operands& x, const HeadMixerDims& d, double scale, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& h0) {
  using Rows = cpu::Rows<const T>;
  x.heads = d.heads;
  x.key_dim = d.key_dim;
  x.value_dim = d.value_dim;
  x.scale = static_cast<T>(scale);
  x.q = Rows::dense(q.data<T>(), d.heads, d.key_dim);
  if (k.defined()) x.k = Rows::dense(k.data<T>(), d.heads, d.key_dim);
  x.v = Rows::dense(v.data<T>(), d.heads, d.value_dim);
  if (h0.defined()) x.h0 = h0.data<T>();
}

// The same views of the gradients dq, dk, dv, dh0 (cpu::DeltaRuleGradients, cpu::GlaGradients);
// an undefined dk or dh0 is left unset.
template <class T, class Gradients>
void view_head_gradients(Gradients& x, const HeadMixerDims& d, Tensor& dq, Tensor& dk, Tensor& dv, Tensor& dh0) {
  using Rows = cpu::Rows<T>;
  x.dq = Rows::dense(dq.data<T>(), d.heads, d.key_dim);
  if (dk.defined()) x.dk = Rows::dense(dk.data<T>(), d.heads, d.key_dim);
  x.dv = Rows::dense(dv.data<T>(), d.heads, d.value_dim);
  if (dh0.defined()) x.dh0 = dh0.data<T>();
}

}  // namespace linea::ops

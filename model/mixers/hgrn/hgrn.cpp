// Checks HGRN's arguments and dispatches to the CPU kernels (model/mixers/hgrn/cpu/hgrn_*) or, for
// tensors on a CUDA device, to model/mixers/hgrn/cuda/hgrn.h.
#include "model/mixers/hgrn/hgrn.h"

#include <string>

#include "kernels/mixer_dtypes.h"
#include "kernels/op_arguments.h"
#include "model/mixers/hgrn/cpu/hgrn_chunked.h"
#include "model/mixers/hgrn/cpu/hgrn_recurrent.h"
#ifdef LINEA_WITH_CUDA
#include "model/mixers/hgrn/cuda/hgrn.h"
#endif

namespace linea::ops {

namespace {

struct Dims {
  int64_t tokens = 0, channels = 0, seqs = 0;
};

Dims check_inputs(OpArguments& args, const std::string& op, const SeqLayout& seqs, const HgrnInputs& in,
                  MixerDtypes& x) {
  args.require(in.x.defined() && in.x.ndim() == 2, "x", "expected [N, D], got " + in.x.describe());
  x = mixer_dtypes(args, op, in.x, "x");
  const Dims d{in.x.dim(0), in.x.dim(1), seqs.num_seqs()};
  args.require(d.channels >= 1, "x", "D must be positive");
  args.layout(seqs, d.tokens);
  args.typed(in.x, "x", {d.tokens, d.channels}, x.operand);
  args.typed(in.g, "g", {d.tokens, d.channels}, x.gate);
  args.optional_typed(in.h0, "h0", {d.seqs, d.channels}, x.gate);
  return d;
}

template <class T>
cpu::HgrnOperands<T> operands(const HgrnInputs& in, const Dims& d) {
  return {d.channels, in.x.data<T>(), in.g.data<T>(), in.h0.defined() ? in.h0.data<T>() : nullptr};
}

}  // namespace

void hgrn_forward(HgrnImpl impl, const SeqLayout& seqs, const HgrnInputs& in, Tensor o, Tensor ht) {
  const std::string op = "hgrn_forward";
  OpArguments args(op);
  MixerDtypes x;
  const Dims d = check_inputs(args, op, seqs, in, x);
  args.typed(o, "o", {d.tokens, d.channels}, x.operand);
  args.optional_typed(ht, "ht", {d.seqs, d.channels}, x.gate);
#ifdef LINEA_WITH_CUDA
  if (x.device == Device::cuda && impl == HgrnImpl::recurrent) return cuda::hgrn_recurrent_forward(seqs, in, o, ht);
  if (x.device == Device::cuda) return cuda::hgrn_forward(seqs, in, o, ht);
#endif
  dispatch_cpu(x.operand, [&](auto zero) {
    using T = decltype(zero);
    T* ht_data = ht.defined() ? ht.data<T>() : nullptr;
    if (impl == HgrnImpl::recurrent) {
      cpu::hgrn_recurrent_forward(operands<T>(in, d), seqs, o.data<T>(), ht_data);
    } else {
      cpu::hgrn_chunked_forward(operands<T>(in, d), seqs, o.data<T>(), ht_data);
    }
  });
}

void hgrn_backward(HgrnImpl impl, const SeqLayout& seqs, const HgrnInputs& in, const Tensor& d_o, const Tensor& dht,
                   HgrnGrads& grads) {
  const std::string op = "hgrn_backward";
  OpArguments args(op);
  MixerDtypes x;
  const Dims d = check_inputs(args, op, seqs, in, x);
  args.typed(d_o, "d_o", {d.tokens, d.channels}, x.operand);
  args.optional_typed(dht, "dht", {d.seqs, d.channels}, x.gate);
  args.typed(grads.dx, "dx", {d.tokens, d.channels}, x.operand);
  args.typed(grads.dg, "dg", {d.tokens, d.channels}, x.gate);
  args.optional_typed(grads.dh0, "dh0", {d.seqs, d.channels}, x.gate);
#ifdef LINEA_WITH_CUDA
  if (x.device == Device::cuda) return cuda::hgrn_backward(seqs, in, d_o, dht, grads);
#endif
  dispatch_cpu(x.operand, [&](auto zero) {
    using T = decltype(zero);
    const cpu::HgrnGradients<T> dx{grads.dx.data<T>(), grads.dg.data<T>(),
                                   grads.dh0.defined() ? grads.dh0.data<T>() : nullptr};
    const T* dht_data = dht.defined() ? dht.data<T>() : nullptr;
    if (impl == HgrnImpl::recurrent) {
      cpu::hgrn_recurrent_backward(operands<T>(in, d), seqs, d_o.data<T>(), dht_data, dx);
    } else {
      cpu::hgrn_chunked_backward(operands<T>(in, d), seqs, d_o.data<T>(), dht_data, dx);
    }
  });
}

}  // namespace linea::ops

// Checks HGRN's arguments and dispatches to the CPU kernels (model/mixers/hgrn/cpu/hgrn_*).
#include "model/mixers/hgrn/hgrn.h"

#include "kernels/op_arguments.h"
#include "model/mixers/hgrn/cpu/hgrn_chunked.h"
#include "model/mixers/hgrn/cpu/hgrn_recurrent.h"

namespace linea::ops {

namespace {

struct Dims {
  int64_t tokens = 0, channels = 0, seqs = 0;
};

Dims check_inputs(OpArguments& args, const SeqLayout& seqs, const HgrnInputs& in) {
  args.require(in.x.defined() && in.x.ndim() == 2, "x", "expected [N, D], got " + in.x.describe());
  const Dims d{in.x.dim(0), in.x.dim(1), seqs.num_seqs()};
  args.require(d.channels >= 1, "x", "D must be positive");
  try {
    seqs.validate(d.tokens);
  } catch (const std::invalid_argument& e) {
    args.fail("seqs", e.what());
  }
  args.floating(in.x, "x", {d.tokens, d.channels});
  args.floating(in.g, "g", {d.tokens, d.channels});
  args.optional_floating(in.h0, "h0", {d.seqs, d.channels});
  return d;
}

template <class T>
cpu::HgrnOperands<T> operands(const HgrnInputs& in, const Dims& d) {
  return {d.channels, in.x.data<T>(), in.g.data<T>(), in.h0.defined() ? in.h0.data<T>() : nullptr};
}

}  // namespace

void hgrn_forward(HgrnImpl impl, const SeqLayout& seqs, const HgrnInputs& in, Tensor o, Tensor ht) {
  OpArguments args("hgrn_forward");
  const Dims d = check_inputs(args, seqs, in);
  args.floating(o, "o", {d.tokens, d.channels});
  args.optional_floating(ht, "ht", {d.seqs, d.channels});
  args.dispatch([&](auto zero) {
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
  OpArguments args("hgrn_backward");
  const Dims d = check_inputs(args, seqs, in);
  args.floating(d_o, "d_o", {d.tokens, d.channels});
  args.optional_floating(dht, "dht", {d.seqs, d.channels});
  args.floating(grads.dx, "dx", {d.tokens, d.channels});
  args.floating(grads.dg, "dg", {d.tokens, d.channels});
  args.optional_floating(grads.dh0, "dh0", {d.seqs, d.channels});
  args.dispatch([&](auto zero) {
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

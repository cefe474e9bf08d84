// Checks HGRN's arguments and dispatches to the CPU kernels (model/mixers/hgrn/cpu/hgrn_*) or, for
// tensors on a CUDA device, to model/mixers/hgrn/cuda/hgrn.h.
#include "model/mixers/hgrn/hgrn.h"

#include <stdexcept>
#include <string>

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

// The dtypes of one call: on the CPU everything has x's dtype (f32 or f64); on CUDA x, o, d_o and
// dx have x's dtype (f32 or bf16), g, dg and the states are f32.
struct Expected {
  Device device = Device::cpu;
  DType operand = DType::f32, gate = DType::f32;
};

Expected expected_types(const OpArguments& args, const std::string& op, const Tensor& x) {
  if (x.device() == Device::cpu) {
    args.require(x.dtype() == DType::f32 || x.dtype() == DType::f64, "x",
                 "expected f32 or f64 on the CPU, got " + x.describe());
    return {Device::cpu, x.dtype(), x.dtype()};
  }
#ifndef LINEA_WITH_CUDA
  throw std::runtime_error(op + ": x is on " + std::string(device_name(x.device())) +
                           " but this build has no CUDA backend (configure with -DLINEA_CUDA=ON)");
#else
  (void)op;
  args.require(x.dtype() == DType::f32 || x.dtype() == DType::bf16, "x",
               "expected f32 or bf16 on cuda, got " + x.describe());
  return {Device::cuda, x.dtype(), DType::f32};
#endif
}

Dims check_inputs(OpArguments& args, const std::string& op, const SeqLayout& seqs, const HgrnInputs& in,
                  Expected& x) {
  args.require(in.x.defined() && in.x.ndim() == 2, "x", "expected [N, D], got " + in.x.describe());
  x = expected_types(args, op, in.x);
  const Dims d{in.x.dim(0), in.x.dim(1), seqs.num_seqs()};
  args.require(d.channels >= 1, "x", "D must be positive");
  try {
    seqs.validate(d.tokens);
  } catch (const std::invalid_argument& e) {
    args.fail("seqs", e.what());
  }
  args.typed(in.x, "x", {d.tokens, d.channels}, x.operand);
  args.typed(in.g, "g", {d.tokens, d.channels}, x.gate);
  args.optional_typed(in.h0, "h0", {d.seqs, d.channels}, x.gate);
  return d;
}

// fn(float{}) or fn(double{}) for a CPU call.
template <class Fn>
void dispatch(const Expected& x, Fn&& fn) {
  if (x.operand == DType::f32) {
    fn(float{});
  } else {
    fn(double{});
  }
}

template <class T>
cpu::HgrnOperands<T> operands(const HgrnInputs& in, const Dims& d) {
  return {d.channels, in.x.data<T>(), in.g.data<T>(), in.h0.defined() ? in.h0.data<T>() : nullptr};
}

}  // namespace

void hgrn_forward(HgrnImpl impl, const SeqLayout& seqs, const HgrnInputs& in, Tensor o, Tensor ht) {
  const std::string op = "hgrn_forward";
  OpArguments args(op);
  Expected x;
  const Dims d = check_inputs(args, op, seqs, in, x);
  args.typed(o, "o", {d.tokens, d.channels}, x.operand);
  args.optional_typed(ht, "ht", {d.seqs, d.channels}, x.gate);
#ifdef LINEA_WITH_CUDA
  if (x.device == Device::cuda) return cuda::hgrn_forward(seqs, in, o, ht);
#endif
  dispatch(x, [&](auto zero) {
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
  Expected x;
  const Dims d = check_inputs(args, op, seqs, in, x);
  args.typed(d_o, "d_o", {d.tokens, d.channels}, x.operand);
  args.optional_typed(dht, "dht", {d.seqs, d.channels}, x.gate);
  args.typed(grads.dx, "dx", {d.tokens, d.channels}, x.operand);
  args.typed(grads.dg, "dg", {d.tokens, d.channels}, x.gate);
  args.optional_typed(grads.dh0, "dh0", {d.seqs, d.channels}, x.gate);
#ifdef LINEA_WITH_CUDA
  if (x.device == Device::cuda) return cuda::hgrn_backward(seqs, in, d_o, dht, grads);
#endif
  dispatch(x, [&](auto zero) {
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

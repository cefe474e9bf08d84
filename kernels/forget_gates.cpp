// Checks and CPU dispatch of the gated-linear-attention family's and HGRN's gates (kernels/ops.h).
#include "kernels/cpu/forget_gates.h"

#include <cmath>
#include <string>

#include "kernels/op_arguments.h"
#include "kernels/ops.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/ops.h"
#endif

namespace linea::ops {

namespace {

const Shape kMatrix = {kAnyDim, kAnyDim};

void check_normalizer(const OpArguments& args, double normalizer) {
  args.require(std::isfinite(normalizer) && normalizer > 0, "normalizer",
               "expected a finite value > 0, got " + std::to_string(normalizer));
}

template <class T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// Checks dt: [N, H] against A_log, dt_bias: [H].
void check_ssd_parameters(OpArguments& args, const Tensor& dt, const Tensor& A_log, const Tensor& dt_bias) {
  args.floating(dt, "dt", kMatrix);
  args.floating(A_log, "A_log", {dt.dim(1)}).floating(dt_bias, "dt_bias", {dt.dim(1)});
}

}  // namespace

void log_forget_gate_forward(Tensor g, const Tensor& logits, const Tensor& lower_bound, double normalizer) {
  OpArguments args("log_forget_gate_forward");
  args.floating(logits, "logits", kMatrix);
  args.floating(g, "g", logits.shape()).optional_floating(lower_bound, "lower_bound", {logits.dim(1)});
  check_normalizer(args, normalizer);
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::log_forget_gate_forward(g, logits, lower_bound, normalizer);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::log_forget_gate_forward(g.data<T>(), logits.data<T>(), data_or_null<T>(lower_bound), logits.dim(0),
                                 logits.dim(1), static_cast<T>(normalizer));
  });
}

void log_forget_gate_backward(Tensor dlogits, Tensor dlower_bound, const Tensor& dg, const Tensor& logits,
                              const Tensor& lower_bound, double normalizer) {
  OpArguments args("log_forget_gate_backward");
  args.floating(logits, "logits", kMatrix);
  args.floating(dg, "dg", logits.shape()).floating(dlogits, "dlogits", logits.shape());
  args.optional_floating(lower_bound, "lower_bound", {logits.dim(1)});
  args.optional_floating(dlower_bound, "dlower_bound", {logits.dim(1)});
  args.require(!dlower_bound.defined() || lower_bound.defined(), "dlower_bound", "given without a lower_bound");
  check_normalizer(args, normalizer);
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::log_forget_gate_backward(dlogits, dlower_bound, dg, logits, lower_bound, normalizer);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::log_forget_gate_backward(dlogits.data<T>(), data_or_null<T>(dlower_bound), dg.data<T>(), logits.data<T>(),
                                  data_or_null<T>(lower_bound), logits.dim(0), logits.dim(1),
                                  static_cast<T>(normalizer));
  });
}

void forget_input_forward(Tensor out, const Tensor& i, const Tensor& g) {
  OpArguments args("forget_input_forward");
  args.floating(i, "i", Shape(static_cast<size_t>(i.ndim()), kAnyDim));
  args.floating(g, "g", i.shape()).floating(out, "out", i.shape());
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::forget_input_forward(out, i, g);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::forget_input_forward(out.data<T>(), i.data<T>(), g.data<T>(), i.numel());
  });
}

void forget_input_backward(Tensor di, Tensor dg, const Tensor& dout, const Tensor& i, const Tensor& g) {
  OpArguments args("forget_input_backward");
  args.floating(i, "i", Shape(static_cast<size_t>(i.ndim()), kAnyDim));
  args.floating(g, "g", i.shape()).floating(dout, "dout", i.shape());
  args.floating(di, "di", i.shape()).floating(dg, "dg", i.shape());
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::forget_input_backward(di, dg, dout, i, g);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::forget_input_backward(di.data<T>(), dg.data<T>(), dout.data<T>(), i.data<T>(), g.data<T>(), i.numel());
  });
}

void exp_decay_forward(Tensor g, const Tensor& w) {
  OpArguments args("exp_decay_forward");
  args.floating(w, "w", Shape(static_cast<size_t>(w.ndim()), kAnyDim)).floating(g, "g", w.shape());
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::exp_decay_forward(g, w);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::exp_decay_forward(g.data<T>(), w.data<T>(), w.numel());
  });
}

void exp_decay_backward(Tensor dw, const Tensor& dg, const Tensor& g) {
  OpArguments args("exp_decay_backward");
  args.floating(g, "g", Shape(static_cast<size_t>(g.ndim()), kAnyDim));
  args.floating(dg, "dg", g.shape()).floating(dw, "dw", g.shape());
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::exp_decay_backward(dw, dg, g);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::exp_decay_backward(dw.data<T>(), dg.data<T>(), g.data<T>(), g.numel());
  });
}

void ssd_gate_forward(Tensor g, Tensor delta, const Tensor& dt, const Tensor& A_log, const Tensor& dt_bias) {
  OpArguments args("ssd_gate_forward");
  check_ssd_parameters(args, dt, A_log, dt_bias);
  args.floating(g, "g", dt.shape()).floating(delta, "delta", dt.shape());
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::ssd_gate_forward(g, delta, dt, A_log, dt_bias);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::ssd_gate_forward(g.data<T>(), delta.data<T>(), dt.data<T>(), A_log.data<T>(), dt_bias.data<T>(), dt.dim(0),
                          dt.dim(1));
  });
}

void ssd_gate_backward(Tensor ddt, Tensor dA_log, Tensor ddt_bias, const Tensor& dg, const Tensor& ddelta,
                       const Tensor& dt, const Tensor& A_log, const Tensor& dt_bias) {
  OpArguments args("ssd_gate_backward");
  check_ssd_parameters(args, dt, A_log, dt_bias);
  args.floating(dg, "dg", dt.shape()).floating(ddelta, "ddelta", dt.shape()).floating(ddt, "ddt", dt.shape());
  args.floating(dA_log, "dA_log", A_log.shape()).floating(ddt_bias, "ddt_bias", dt_bias.shape());
  args.require(ddt.raw() != dg.raw() && ddt.raw() != ddelta.raw(), "ddt", "must not share storage with dg or ddelta");
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::ssd_gate_backward(ddt, dA_log, ddt_bias, dg, ddelta, dt, A_log, dt_bias);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::ssd_gate_backward(ddt.data<T>(), dA_log.data<T>(), ddt_bias.data<T>(), dg.data<T>(), ddelta.data<T>(),
                           dt.data<T>(), A_log.data<T>(), dt_bias.data<T>(), dt.dim(0), dt.dim(1));
  });
}

void layer_lower_bound_forward(Tensor lower_bound, const Tensor& gamma, int64_t layer) {
  OpArguments args("layer_lower_bound_forward");
  args.floating(gamma, "gamma", kMatrix).floating(lower_bound, "lower_bound", {gamma.dim(1)});
  args.require(layer >= 0 && layer < gamma.dim(0), "layer",
               "expected a layer in [0, " + std::to_string(gamma.dim(0)) + "), got " + std::to_string(layer));
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::layer_lower_bound_forward(lower_bound, gamma, layer);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::layer_lower_bound_forward(lower_bound.data<T>(), gamma.data<T>(), gamma.dim(0), gamma.dim(1), layer);
  });
}

void layer_lower_bound_backward(Tensor dgamma, const Tensor& dlower_bound, const Tensor& gamma, int64_t layer) {
  OpArguments args("layer_lower_bound_backward");
  args.floating(gamma, "gamma", kMatrix).floating(dgamma, "dgamma", gamma.shape());
  args.floating(dlower_bound, "dlower_bound", {gamma.dim(1)});
  args.require(layer >= 0 && layer < gamma.dim(0), "layer",
               "expected a layer in [0, " + std::to_string(gamma.dim(0)) + "), got " + std::to_string(layer));
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::layer_lower_bound_backward(dgamma, dlower_bound, gamma, layer);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::layer_lower_bound_backward(dgamma.data<T>(), dlower_bound.data<T>(), gamma.data<T>(), gamma.dim(0),
                                    gamma.dim(1), layer);
  });
}

}  // namespace linea::ops

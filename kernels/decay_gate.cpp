#include "kernels/cpu/decay_gate.h"

#include "kernels/op_arguments.h"
#include "kernels/ops.h"

namespace linea::ops {

namespace {
// Checks a: [N, H·c] against A_log: [H]; returns c (the decays per head).
int64_t decays_per_head(OpArguments& args, const Tensor& a, const Tensor& A_log) {
  args.floating(a, "a", {kAnyDim, kAnyDim}).floating(A_log, "A_log", {kAnyDim});
  return args.head_width(a, "a", A_log.dim(0), "A_log's head count");
}
}  // namespace

void decay_gate_forward(Tensor g, const Tensor& a, const Tensor& A_log, const Tensor& dt_bias) {
  OpArguments args("decay_gate_forward");
  const int64_t per_head = decays_per_head(args, a, A_log);
  args.floating(dt_bias, "dt_bias", {a.dim(1)}).floating(g, "g", a.shape());
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::decay_gate_forward(g.data<T>(), a.data<T>(), A_log.data<T>(), dt_bias.data<T>(), a.dim(0), A_log.dim(0),
                            per_head);
  });
}

void decay_gate_backward(Tensor da, Tensor dA_log, Tensor ddt_bias, const Tensor& dg, const Tensor& a,
                         const Tensor& A_log, const Tensor& dt_bias) {
  OpArguments args("decay_gate_backward");
  const int64_t per_head = decays_per_head(args, a, A_log);
  args.floating(dt_bias, "dt_bias", {a.dim(1)})
      .floating(dg, "dg", a.shape())
      .floating(da, "da", a.shape())
      .floating(dA_log, "dA_log", A_log.shape())
      .floating(ddt_bias, "ddt_bias", dt_bias.shape());
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::decay_gate_backward(da.data<T>(), dA_log.data<T>(), ddt_bias.data<T>(), dg.data<T>(), a.data<T>(),
                             A_log.data<T>(), dt_bias.data<T>(), a.dim(0), A_log.dim(0), per_head);
  });
}

}  // namespace linea::ops

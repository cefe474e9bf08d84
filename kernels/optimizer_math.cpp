// The optimizer ops: argument checks (OpArguments, with the element count in place of a shape),
// then the CPU loops or, for tensors on a CUDA device, the CUDA kernels (f32 only).
#include "kernels/optimizer_math.h"

#include <initializer_list>
#include <string>
#include <utility>

#include "kernels/cpu/optimizer_math.h"
#include "kernels/op_arguments.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/optimizer_math.h"
#endif

namespace linea::ops {

namespace {

using Operand = std::pair<const Tensor&, const char*>;

// The operands share a dtype and a device (OpArguments) and the first one's element count; on a
// CUDA device they are f32 (the kernels' type).
OpArguments checked(const char* op, std::initializer_list<Operand> operands) {
  OpArguments args(op);
  const Operand& first = *operands.begin();
  for (const auto& [t, name] : operands) {
    args.floating(t, name, Shape(static_cast<size_t>(t.ndim()), kAnyDim));
    args.require(t.numel() == first.first.numel(), name,
                 "expected " + std::to_string(first.first.numel()) + " elements (like " + first.second + "), got " +
                     t.describe());
  }
  args.require(!args.on_cuda() || first.first.dtype() == DType::f32, first.second,
               "on a GPU the operands must be f32, got " + first.first.describe());
  return args;
}

}  // namespace

void adamw_update(const Tensor& theta, const Tensor& grad, const Tensor& m, const Tensor& v,
                  const AdamWCoefficients& c) {
  const OpArguments args = checked("adamw_update", {{theta, "theta"}, {grad, "grad"}, {m, "m"}, {v, "v"}});
  const int64_t n = theta.numel();
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) {
    return cuda::adamw_update(theta.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(), n, c);
  }
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::adamw_update<T>(theta.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(), n, c);
  });
}

void nesterov_momentum(const Tensor& momentum, const Tensor& u, const Tensor& grad, double mu, double grad_scale) {
  const OpArguments args = checked("nesterov_momentum", {{grad, "grad"}, {momentum, "momentum"}, {u, "u"}});
  const int64_t n = grad.numel();
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda())
    return cuda::nesterov_momentum(momentum.data<float>(), u.data<float>(), grad.data<float>(), n, mu, grad_scale);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::nesterov_momentum<T>(momentum.data<T>(), u.data<T>(), grad.data<T>(), n, mu, grad_scale);
  });
}

void decay_and_subtract(const Tensor& theta, const Tensor& o, double decay_factor, double scale) {
  const OpArguments args = checked("decay_and_subtract", {{theta, "theta"}, {o, "o"}});
  const int64_t n = theta.numel();
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::decay_and_subtract(theta.data<float>(), o.data<float>(), n, decay_factor, scale);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::decay_and_subtract<T>(theta.data<T>(), o.data<T>(), n, decay_factor, scale);
  });
}

void scale(const Tensor& x, double factor) {
  const OpArguments args = checked("scale", {{x, "x"}});
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::scale(x.data<float>(), x.numel(), factor);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::scale<T>(x.data<T>(), x.numel(), factor);
  });
}

std::vector<double> sums_of_squares(const std::vector<Tensor>& xs) {
  std::vector<double> sums(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {  // each tensor its own dtype, all on one device
    const OpArguments args = checked("sums_of_squares", {{xs[i], "xs"}});
    args.require(xs[i].device() == xs.front().device(), "xs",
                 "tensors on several devices: " + xs.front().describe() + " and " + xs[i].describe());
    if (args.on_cuda()) continue;
    sums[i] = args.dispatch([&](auto zero) {
      using T = decltype(zero);
      return cpu::sum_of_squares<T>(xs[i].data<T>(), xs[i].numel());
    });
  }
#ifdef LINEA_WITH_CUDA
  if (!xs.empty() && xs.front().device() == Device::cuda) {
    std::vector<std::pair<const float*, int64_t>> runs;
    for (const Tensor& x : xs) runs.emplace_back(x.data<float>(), x.numel());
    cuda::sums_of_squares(runs, sums.data());
  }
#endif
  return sums;
}

}  // namespace linea::ops

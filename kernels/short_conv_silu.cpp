#include <string>

#include "kernels/cpu/short_conv.h"
#include "kernels/op_arguments.h"
#include "kernels/ops.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/ops.h"
#endif

namespace linea::ops {

namespace {
// Checks x: [N, C], weight: [C, W] with W ≥ 1 and that `seqs` covers the N tokens.
void check_conv_arguments(OpArguments& args, const Tensor& x, const Tensor& weight, const SeqLayout& seqs) {
  args.floating(x, "x", {kAnyDim, kAnyDim});
  args.floating(weight, "weight", {x.dim(1), kAnyDim});
  args.require(weight.dim(1) >= 1, "weight", "expected a kernel width ≥ 1, got " + weight.describe());
#ifdef LINEA_WITH_CUDA
  args.require(
      !args.on_cuda() || weight.dim(1) <= cuda::kShortConvMaxWidth, "weight",
      "expected a kernel width ≤ " + std::to_string(cuda::kShortConvMaxWidth) + " on CUDA, got " + weight.describe());
#endif
  args.layout(seqs, x.dim(0));
}
}  // namespace

void short_conv_silu_forward(Tensor out, const Tensor& x, const Tensor& weight, const SeqLayout& seqs,
                             const Tensor& bias) {
  OpArguments args("short_conv_silu_forward");
  check_conv_arguments(args, x, weight, seqs);
  args.floating(out, "out", x.shape()).optional_floating(bias, "bias", {x.dim(1)});
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::short_conv_silu_forward(out, x, weight, bias, seqs);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::short_conv_silu_forward(out.data<T>(), x.data<T>(), weight.data<T>(),
                                 bias.defined() ? bias.data<T>() : nullptr, seqs, x.dim(1), weight.dim(1));
  });
}

void short_conv_silu_backward(Tensor dx, Tensor dweight, const Tensor& dout, const Tensor& x, const Tensor& weight,
                              const SeqLayout& seqs, const Tensor& bias, Tensor dbias) {
  OpArguments args("short_conv_silu_backward");
  check_conv_arguments(args, x, weight, seqs);
  args.floating(dout, "dout", x.shape()).floating(dx, "dx", x.shape()).floating(dweight, "dweight", weight.shape());
  args.optional_floating(bias, "bias", {x.dim(1)}).optional_floating(dbias, "dbias", {x.dim(1)});
  args.require(bias.defined() == dbias.defined(), "dbias", "expected exactly when there is a bias");
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) return cuda::short_conv_silu_backward(dx, dweight, dbias, dout, x, weight, bias, seqs);
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    T* db = dbias.defined() ? dbias.data<T>() : nullptr;
    cpu::short_conv_silu_backward(dx.data<T>(), dweight.data<T>(), db, dout.data<T>(), x.data<T>(), weight.data<T>(),
                                  bias.defined() ? bias.data<T>() : nullptr, seqs, x.dim(1), weight.dim(1));
  });
}

}  // namespace linea::ops

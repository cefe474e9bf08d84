#include "kernels/newton_schulz.h"

#include <algorithm>

#include "kernels/cpu/newton_schulz.h"
#include "kernels/op_arguments.h"
#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/newton_schulz.h"
#endif

namespace linea::ops {

int64_t newton_schulz_workspace_numel(int64_t rows, int64_t cols) {
  const int64_t m = std::min(rows, cols);
  return 2 * rows * cols + 2 * m * m;
}

void newton_schulz(const Tensor& g, Tensor out, int steps, Tensor workspace) {
  OpArguments args("newton_schulz");
  args.require(g.ndim() == 2, "g", "expected a 2-D tensor, got " + g.describe());
  const int64_t rows = g.dim(0), cols = g.dim(1);
  args.floating(g, "g", {rows, cols}).floating(out, "out", {rows, cols});
  args.require(steps >= 0, "steps", "expected ≥ 0, got " + std::to_string(steps));
  if (args.on_cuda()) {
    // The workspace's dtype is the precision of the GEMMs; g and out stay f32.
    args.require(g.dtype() == DType::f32, "g", "expected f32 on a GPU, got " + g.describe());
    args.require(workspace.dtype() == DType::f32 || workspace.dtype() == DType::bf16, "workspace",
                 "expected f32 or bf16 on a GPU, got " + workspace.describe());
    args.typed(workspace, "workspace", {kAnyDim}, workspace.dtype());
  } else {
    args.floating(workspace, "workspace", {kAnyDim});
  }
  args.require(workspace.numel() >= newton_schulz_workspace_numel(rows, cols), "workspace",
               "expected at least " + std::to_string(newton_schulz_workspace_numel(rows, cols)) + " elements, got " +
                   std::to_string(workspace.numel()));
#ifdef LINEA_WITH_CUDA
  if (args.on_cuda()) {
    return cuda::newton_schulz(g.data<float>(), out.data<float>(), rows, cols, steps, workspace.dtype(),
                               workspace.raw());
  }
#endif
  args.dispatch([&](auto zero) {
    using T = decltype(zero);
    cpu::newton_schulz<T>(g.data<T>(), out.data<T>(), rows, cols, steps, workspace.data<T>());
  });
}

}  // namespace linea::ops

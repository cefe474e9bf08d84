// The gates of a bf16 step in f32, for the layers of the gated-linear-attention family and HGRN:
// their CUDA ops take the log decays g, RWKV-6's bonus u and the states in ctx.statistics_dtype()
// (f32 in a bf16 step, the step's dtype otherwise; model/mixers/gla/gla.h, hgrn/hgrn.h), and the
// gate kernels take one dtype for all their arguments. So a layer forms each gate in that dtype:
// from f32 copies of its bf16 logits (widened), on the f32 master weights of its parameters
// (gate_parameter: A_log, dt_bias, the bonus, HGRN's lower bounds Γ, whose gradients go straight
// into the f32 master gradients, as the delta rule's decay gate's do), and hands what flows back
// to the bf16 side in the step's dtype (narrowed). Outside bf16 steps every call returns its
// argument (or the parameter's compute tensors), so f32 and f64 steps are unchanged.
#pragma once
#include "kernels/tensor.h"
#include "model/parameters.h"
#include "model/step_context.h"

namespace linea {

// x in ctx.statistics_dtype(): x itself, or a converted copy in ctx.scratch.
Tensor widened(StepContext& ctx, const Tensor& x);
// x in ctx.dtype: x itself, or a copy rounded into a ctx.temporary.
Tensor narrowed(StepContext& ctx, const Tensor& x);

// A gate parameter in ctx.statistics_dtype(): its compute weights and gradient when they have that
// dtype, else its master weights and gradient (a bf16 step on f32 masters); std::invalid_argument
// naming the parameter when neither has it (a bf16 step on f64 masters).
struct GateParameter {
  Tensor value, grad;
};
GateParameter gate_parameter(const StepContext& ctx, const Parameter& p);

}  // namespace linea

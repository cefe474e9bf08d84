// Calling a layer's short convs (model/short_conv.h) where the layer may have none: silu(conv(x))
// when it has the conv, else x itself (a conv size of 0 in the config); forward from the start of
// each document or continuing a decoding state's input history; backward to the conv's input,
// accumulating its filters' gradient. Shared by the delta-rule, GLA/RetNet and Mamba-2 layers.
#pragma once
#include <optional>

#include "model/input_history.h"
#include "model/short_conv.h"
#include "model/step_context.h"

namespace linea {

// silu(conv(x)), continuing `history` when it is given (decoding), else from each document's start.
Tensor conv_forward_continuing(StepContext& ctx, ShortConv& conv, const Tensor& x, InputHistory* history);
// The same when the layer has the conv; x itself when it has none.
Tensor conv_forward(StepContext& ctx, std::optional<ShortConv>& conv, const Tensor& x, InputHistory* history = nullptr);
// ∂L/∂x of conv_forward from its input x and ∂L/∂y (in ctx.scratch); dy itself when there is no conv.
Tensor conv_backward(StepContext& ctx, std::optional<ShortConv>& conv, const Tensor& x, const Tensor& dy);

}  // namespace linea

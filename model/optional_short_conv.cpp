#include "model/optional_short_conv.h"

namespace linea {

Tensor conv_forward_continuing(StepContext& ctx, ShortConv& conv, const Tensor& x, InputHistory* history) {
  return history ? conv.forward_continuing(ctx, x, *history) : conv.forward(ctx, x);
}

Tensor conv_forward(StepContext& ctx, std::optional<ShortConv>& conv, const Tensor& x, InputHistory* history) {
  return conv ? conv_forward_continuing(ctx, *conv, x, history) : x;
}

Tensor conv_backward(StepContext& ctx, std::optional<ShortConv>& conv, const Tensor& x, const Tensor& dy) {
  if (!conv) return dy;
  Tensor dx = ctx.temporary(dy.shape());
  conv->backward(ctx, x, dy, dx);
  return dx;
}

}  // namespace linea

#include "model/partial_gradient_sum.h"

#include <stdexcept>

#include "kernels/device_memory.h"
#include "kernels/ops.h"

namespace linea {

namespace {

// Copies the parameters' (compute) gradients one after the other into flat (to_flat) or back.
void pack(const std::vector<Parameter*>& params, const Tensor& flat, bool to_flat) {
  char* at = static_cast<char*>(flat.raw());
  for (Parameter* p : params) {
    const Tensor& grad = p->compute_grad;
    const size_t bytes = grad.nbytes();
    if (to_flat) {
      copy_device_memory(at, flat.device(), grad.raw(), grad.device(), bytes);
    } else {
      copy_device_memory(grad.raw(), grad.device(), at, flat.device(), bytes);
    }
    at += bytes;
  }
}

}  // namespace

PartialGradientSum::PartialGradientSum(ParameterSet& params) {
  for (Parameter& p : params.params()) {
    if (!p.partial_grad) continue;
    params_.push_back(&p);
    numel_ += shape_numel(p.shape);
  }
}

void PartialGradientSum::begin() {
  if (params_.empty()) return;
  if (!set_aside_.defined()) {
    const Tensor& grad = params_.front()->compute_grad;
    set_aside_ = Tensor::empty({numel_}, grad.dtype(), grad.device());
    parts_ = Tensor::empty({numel_}, grad.dtype(), grad.device());
  }
  pack(params_, set_aside_, true);
  for (Parameter* p : params_) p->compute_grad.zero();
}

void PartialGradientSum::finish(const TensorParallel& tp) {
  if (params_.empty()) return;
  if (!set_aside_.defined()) throw std::logic_error("PartialGradientSum::finish without begin");
  pack(params_, parts_, true);
  tp.all_reduce_sum(parts_);
  ops::add_inplace(parts_, set_aside_);
  pack(params_, parts_, false);
}

}  // namespace linea

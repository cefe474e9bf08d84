#include "worker/partial_gradient_sum.h"

#include <cstring>
#include <stdexcept>

#include "kernels/ops.h"

namespace linea {

namespace {

// Copies the parameters' gradients one after the other into flat (to_flat) or back (!to_flat).
void pack(const std::vector<Parameter*>& params, const Tensor& flat, bool to_flat) {
  char* at = static_cast<char*>(flat.raw());
  for (Parameter* p : params) {
    const size_t bytes = p->grad.nbytes();
    if (to_flat) {
      std::memcpy(at, p->grad.raw(), bytes);
    } else {
      std::memcpy(p->grad.raw(), at, bytes);
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
    const DType dtype = params_.front()->grad.dtype();
    set_aside_ = Tensor::empty({numel_}, dtype);
    parts_ = Tensor::empty({numel_}, dtype);
  }
  pack(params_, set_aside_, true);
  for (Parameter* p : params_) p->grad.zero();
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

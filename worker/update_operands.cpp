#include "worker/update_operands.h"

#include <stdexcept>
#include <string>

namespace linea {

Device check_update_operands(const char* who, const Tensor& first, std::initializer_list<const Tensor*> others) {
  for (const Tensor* t : others) {
    if (t->numel() != first.numel() || t->dtype() != first.dtype() || t->device() != first.device()) {
      throw std::invalid_argument(std::string(who) + ": operands " + first.describe() + " and " + t->describe() +
                                  " differ; expected the same dtype, element count and device");
    }
  }
  if (first.device() == Device::cuda && first.dtype() != DType::f32) {
    throw std::invalid_argument(std::string(who) + ": on a GPU the operands must be f32, got " + first.describe());
  }
  return first.device();
}

}  // namespace linea

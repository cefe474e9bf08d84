// The argument check shared by the optimizer's elementwise updates (AdamW, Muon's momentum and
// update): every operand has first's dtype and element count (shapes may differ) and lies on
// first's device; on a CUDA device the dtype must be f32 (the GPU kernels' type). Throws
// std::invalid_argument naming `who` and the operands otherwise. Returns the device.
#pragma once
#include <initializer_list>

#include "kernels/tensor.h"

namespace linea {

Device check_update_operands(const char* who, const Tensor& first, std::initializer_list<const Tensor*> others);

}  // namespace linea

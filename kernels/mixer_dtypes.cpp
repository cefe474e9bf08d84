#include "kernels/mixer_dtypes.h"

#include <stdexcept>

namespace linea::ops {

MixerDtypes mixer_dtypes(const OpArguments& args, const std::string& op, const Tensor& operand, std::string_view name) {
  if (operand.device() == Device::cpu) {
    args.require(operand.dtype() == DType::f32 || operand.dtype() == DType::f64, name,
                 "expected f32 or f64 on the CPU, got " + operand.describe());
    return {Device::cpu, operand.dtype(), operand.dtype()};
  }
#ifndef LINEA_WITH_CUDA
  throw std::runtime_error(op + ": " + std::string(name) + " is on " + std::string(device_name(operand.device())) +
                           " but this build has no CUDA backend (configure with -DLINEA_CUDA=ON)");
#else
  (void)op;
  args.require(operand.dtype() == DType::f32 || operand.dtype() == DType::bf16, name,
               "expected f32 or bf16 on cuda, got " + operand.describe());
  return {Device::cuda, operand.dtype(), DType::f32};
#endif
}

}  // namespace linea::ops

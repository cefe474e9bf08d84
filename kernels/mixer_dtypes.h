// The dtypes of a mixer op's arguments (the delta rule, the gated-linear-attention family, HGRN), fixed by its first
// token operand: on the CPU every argument has that operand's dtype, f32 or f64; on CUDA the token
// operands (and their gradients) have it, f32 or bf16, and the gates, log decays and states are
// f32. mixer_dtypes() checks the operand and throws std::invalid_argument "OP: NAME: expected …"
// (std::runtime_error for a CUDA tensor in a build without CUDA); dispatch_cpu() calls fn(float{})
// or fn(double{}) for a CPU call's dtype.
#pragma once
#include <string>
#include <string_view>

#include "kernels/op_arguments.h"
#include "kernels/tensor.h"

namespace linea::ops {

struct MixerDtypes {
  Device device = Device::cpu;
  DType operand = DType::f32, gate = DType::f32;
};

MixerDtypes mixer_dtypes(const OpArguments& args, const std::string& op, const Tensor& operand, std::string_view name);

template <class Fn>
void dispatch_cpu(DType dtype, Fn&& fn) {
  if (dtype == DType::f32) {
    fn(float{});
  } else {
    fn(double{});
  }
}

}  // namespace linea::ops

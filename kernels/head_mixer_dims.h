// The first checks of a head mixer's call (the delta rule, the gated-linear-attention family), whose
// token operands are q: [N, H, K] and v: [N, H, V] over the S sequences of a layout: q and v are
// defined and 3-D, their dtypes are the mixer's (mixer_dtypes of q, which sets `x`), H, K, V ≥ 1,
// K ≤ max_cuda_key_dim for CUDA tensors, and seqs is a layout of the N tokens. Each failure throws
// std::invalid_argument "OP: NAME: expected …" (kernels/op_arguments.h).
#pragma once
#include <cstdint>
#include <string>

#include "kernels/mixer_dtypes.h"
#include "kernels/op_arguments.h"
#include "kernels/seq_layout.h"
#include "kernels/tensor.h"

namespace linea::ops {

struct HeadMixerDims {
  int64_t tokens = 0, heads = 0, key_dim = 0, value_dim = 0, seqs = 0;
};

HeadMixerDims check_head_mixer_dims(OpArguments& args, const std::string& op, const Tensor& q, const Tensor& v,
                                    const SeqLayout& seqs, int64_t max_cuda_key_dim, MixerDtypes& x);

}  // namespace linea::ops

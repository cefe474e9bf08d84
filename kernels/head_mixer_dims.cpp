#include "kernels/head_mixer_dims.h"

namespace linea::ops {

HeadMixerDims check_head_mixer_dims(OpArguments& args, const std::string& op, const Tensor& q, const Tensor& v,
                                    const SeqLayout& seqs, int64_t max_cuda_key_dim, MixerDtypes& x) {
  args.require(q.defined() && q.ndim() == 3, "q", "expected [N, H, K], got " + q.describe());
  args.require(v.defined() && v.ndim() == 3, "v", "expected [N, H, V], got " + v.describe());
  x = mixer_dtypes(args, op, q, "q");
  const HeadMixerDims d{q.dim(0), q.dim(1), q.dim(2), v.dim(2), seqs.num_seqs()};
  args.require(d.heads >= 1 && d.key_dim >= 1 && d.value_dim >= 1, "q", "H, K and V must be positive");
  args.require(
      x.device != Device::cuda || d.key_dim <= max_cuda_key_dim, "q",
      "the CUDA kernels take K ≤ " + std::to_string(max_cuda_key_dim) + ", got K = " + std::to_string(d.key_dim));
  args.layout(seqs, d.tokens);
  return d;
}

}  // namespace linea::ops

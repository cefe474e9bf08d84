// Routes CUDA attention calls (ops::attention_forward / attention_backward after their argument
// checks) as shape.backend asks: automatic runs cuDNN's fused flash attention
// (model/mixers/attention/cuda/cudnn_attention.h) where it serves the call and the own flash kernels
// (cuda/attention.h) elsewhere, logging once per distinct case which one runs and why;
// cudnn runs cuDNN and throws std::invalid_argument with cuDNN's reason where it cannot; own runs
// the own kernels. A build without cuDNN routes every call to the own kernels.
#pragma once
#include <string>
#include <vector>

#include "model/mixers/attention/attention.h"

namespace linea::cuda {

void route_attention_forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             const ops::AttentionShape& shape, const SeqLayout& seqs);
void route_attention_backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& out, const Tensor& lse, const ops::AttentionShape& shape,
                              const SeqLayout& seqs);

// What served the last routed call on this thread: cuDNN (and its plan) or the own kernels, and
// why the latter.
struct AttentionRoute {
  bool cudnn = false;
  std::string reason;  // empty when cuDNN served it
  std::string plan;    // cuDNN's plan when it served the call: engine and knob choices (cudnn_attention.h)
};
AttentionRoute last_attention_route();

// Builds, without running, cuDNN's execution plan of the forward (or backward) graph for `shape`
// and `seqs` against a device described by cuDNN's JSON device properties
// (cudnn_attention_plan_check in model/mixers/attention/cuda/cudnn_attention.h): "" or why not, e.g. "linea was
// built without cuDNN".
std::string check_cudnn_attention_plan(const std::string& device_json, bool backward, const ops::AttentionShape& shape,
                                       const SeqLayout& seqs);

// The candidate plans cuDNN builds on the calling thread's device for the forward (or backward)
// graph of `shape` and `seqs`, the heuristics' first first: all that autotuning would time, or
// that one alone without it (cudnn_attention_candidates in cudnn_attention.h); built afresh.
// Empty in a build without cuDNN; throws std::runtime_error where cuDNN builds no plan.
std::vector<std::string> cudnn_attention_plan_candidates(bool backward, const ops::AttentionShape& shape,
                                                         const SeqLayout& seqs);

}  // namespace linea::cuda

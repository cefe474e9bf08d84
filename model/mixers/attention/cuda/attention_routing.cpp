#include "model/mixers/attention/cuda/attention_routing.h"

#include <glog/logging.h>

#include <mutex>
#include <set>
#include <stdexcept>

#include "model/mixers/attention/cuda/attention.h"
#ifdef LINEA_WITH_CUDNN
#include "model/mixers/attention/cuda/cudnn_attention.h"
#endif

namespace linea::cuda {

namespace {

#ifndef LINEA_WITH_CUDNN
// A build without cuDNN refuses every call the same way.
constexpr const char* kNoCudnn = "linea was built without cuDNN";
std::string cudnn_attention_forward(Tensor, Tensor, const Tensor&, const Tensor&, const Tensor&,
                                    const ops::AttentionShape&, const SeqLayout&) {
  return kNoCudnn;
}
std::string cudnn_attention_backward(Tensor, Tensor, Tensor, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                     const Tensor&, const Tensor&, const ops::AttentionShape&, const SeqLayout&) {
  return kNoCudnn;
}
std::string cudnn_version_string() { return ""; }
std::string cudnn_attention_plan_check(const std::string&, bool, const ops::AttentionShape&, const SeqLayout&) {
  return kNoCudnn;
}
std::string cudnn_attention_last_plan() { return ""; }
std::vector<std::string> cudnn_attention_candidates(bool, const ops::AttentionShape&, const SeqLayout&) { return {}; }
#endif

thread_local AttentionRoute last_route;

// Logs `line` the first time this process sees it.
void log_once(const std::string& line) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  const std::lock_guard<std::mutex> lock(mutex);
  if (seen.insert(line).second) LOG(INFO) << line;
}

// Runs cuDNN unless the backend is "own"; true when cuDNN served the call. Logs once which
// implementation serves it and why, and remembers that for last_attention_route().
template <class RunCudnn>
bool served_by_cudnn(const char* op, const char* direction, const ops::AttentionShape& shape, RunCudnn&& run_cudnn) {
  const std::string refusal = shape.backend == ops::AttentionBackend::own ? "backend = \"own\"" : run_cudnn();
  if (!refusal.empty() && shape.backend == ops::AttentionBackend::cudnn) {
    throw std::invalid_argument(std::string(op) + ": backend = \"cudnn\", but cuDNN cannot serve it: " + refusal);
  }
  last_route = {refusal.empty(), refusal, refusal.empty() ? cudnn_attention_last_plan() : ""};
  if (refusal.empty()) {
    log_once("attention: cuDNN " + cudnn_version_string() + " fused flash attention serves the " + direction);
  } else {
    log_once(std::string("attention: the own flash kernels serve the ") + direction + " (" + refusal + ")");
  }
  return refusal.empty();
}

}  // namespace

void route_attention_forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             const ops::AttentionShape& shape, const SeqLayout& seqs) {
  const bool done = served_by_cudnn("attention_forward", "forward", shape,
                                    [&] { return cudnn_attention_forward(out, lse, q, k, v, shape, seqs); });
  if (!done) cuda::attention_forward(out, lse, q, k, v, shape, seqs);
}

void route_attention_backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& out, const Tensor& lse, const ops::AttentionShape& shape,
                              const SeqLayout& seqs) {
  const bool done = served_by_cudnn("attention_backward", "backward", shape, [&] {
    return cudnn_attention_backward(dq, dk, dv, dout, q, k, v, out, lse, shape, seqs);
  });
  if (!done) cuda::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, shape, seqs);
}

AttentionRoute last_attention_route() { return last_route; }

std::string check_cudnn_attention_plan(const std::string& device_json, bool backward, const ops::AttentionShape& shape,
                                       const SeqLayout& seqs) {
  return cudnn_attention_plan_check(device_json, backward, shape, seqs);
}

std::vector<std::string> cudnn_attention_plan_candidates(bool backward, const ops::AttentionShape& shape,
                                                         const SeqLayout& seqs) {
  return cudnn_attention_candidates(backward, shape, seqs);
}

}  // namespace linea::cuda

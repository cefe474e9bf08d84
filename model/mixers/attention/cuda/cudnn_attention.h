// Causal softmax attention on cuDNN's fused flash attention, through its backend graph API
// (cudnn_graph.h): ops::attention_forward / attention_backward (../attention.h) with the same
// arguments and math, bf16 tensors, head dims that are multiples of 8 up to 128, cuDNN
// 9.11 or newer. The graphs are cuDNN's SDPA patterns: S = scale · Q Kᵀ, masks as index
// comparisons and selects (the causal diagonal, the sliding window as a left bound, document
// lengths as a padding mask), softmax with its statistics (lse), O = P V; the backward recomputes P
// from lse, then dV = Pᵀ dO, dS = P (dO Vᵀ − rowsum(dO ∘ O)), dK = scale dSᵀ Q, dQ = scale dS K
// (dQ summed in f32). GQA runs as cuDNN's grouped heads.
//
// Layouts: sequences all of one length T that is a multiple of 128 run as a dense [B, T, H, D]
// batch; any other SeqLayout (packed documents, odd lengths) runs as a ragged batch: per-document
// element offsets and lengths, the batch and the longest document rounded up to powers of two so
// that a few plans serve every step. A plan is built (engine heuristics) on first sight of a shape
// and kept per thread, device and shape.cudnn_autotune; its workspace comes from the CUDA scratch
// buffer. Autotuning (shape.cudnn_autotune): on first sight of a shape the plans of up to 8 of the
// engine configurations the heuristics rank are built (any other than the heuristics' first only
// with at most the workspace of two f32 copies of the queries, and 256 MiB in any case), and the first call times each
// on its own tensors (a warm-up run, then the median of 5 runs between CUDA events), keeps the fastest, logs every
// candidate's time and the choice, then runs the chosen plan for its result; a failure while timing keeps the
// heuristics' first, with a log line. Without autotuning the heuristics' first runs.
// Built only with cuDNN (CMake LINEA_CUDNN).
#pragma once
#include <string>
#include <vector>

#include "model/mixers/attention/attention.h"

namespace linea::cuda {

// Runs the op on cuDNN and returns "", or returns why cuDNN cannot serve the call (its version,
// the dtype, the head dim, the device, alignment, or the answer of cuDNN's heuristics) and writes
// nothing. Other failures throw.
std::string cudnn_attention_forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const ops::AttentionShape& shape, const SeqLayout& seqs);
// dq, dk, dv overwritten
std::string cudnn_attention_backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout, const Tensor& q,
                                     const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                                     const ops::AttentionShape& shape, const SeqLayout& seqs);

// The cuDNN library this process runs, e.g. "9.14.0".
std::string cudnn_version_string();

// The plan that ran the calling thread's last cuDNN attention call: its engine and knob choices,
// e.g. "engine 8 (k40=3 k41=2)"; "" before any ran.
std::string cudnn_attention_last_plan();

// The candidate plans the calling thread's device builds for the forward (or backward) graph of
// `shape` and `seqs`, by name as above, the heuristics' first first: every candidate autotuning
// would time (shape.cudnn_autotune) or the heuristics' first alone. Built afresh, without the plan
// cache. Throws std::runtime_error where cuDNN builds no plan.
std::vector<std::string> cudnn_attention_candidates(bool backward, const ops::AttentionShape& shape,
                                                    const SeqLayout& seqs);

// Builds, without running, the execution plan of the forward (or backward) graph for `shape` and
// `seqs` against a device described by cuDNN's JSON device properties (cudnn_graph.h, Target), so
// that a machine without that GPU checks that cuDNN accepts the graph. Returns "" or why not.
// Builds the heuristics' first plan only (no autotuning candidates: they could not be timed).
std::string cudnn_attention_plan_check(const std::string& device_json, bool backward, const ops::AttentionShape& shape,
                                       const SeqLayout& seqs);

}  // namespace linea::cuda

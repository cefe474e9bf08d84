#include "model/mixers/attention/cuda/cudnn_attention.h"

#include <cuda_runtime.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/scratch.h"
#include "model/mixers/attention/cuda/attention_statistics.h"
#include "model/mixers/attention/cuda/cudnn_graph.h"

namespace linea::cuda {

namespace {

using cudnn::OpGraph;
using cudnn::TensorRef;

// 9.11: the oldest cuDNN whose fused attention these graphs were written for (9.10.0 and 9.10.1
// have known attention bugs; before 9.10 the backward needs an extra padding select).
constexpr int64_t kOldestVersion = 91100;
constexpr int64_t kMaxHeadDim = 128;
// cuDNN up to 9.15 needs a padding mask in the backward unless the sequence length is a multiple
// of 128: other uniform layouts run as ragged ones.
constexpr int64_t kDenseMultiple = 128;
// A ragged batch's bound S on the document length is at least this (cuDNN's backward refuses
// S = 1, and tiny bounds would only multiply the plans).
constexpr int64_t kShortestRaggedBound = 64;
// Autotuning: at most this many candidate plans per shape (the heuristics' choice among them); a
// candidate other than the heuristics' choice that needs more workspace than
// autotune_workspace_limit is left out (the scratch buffer keeps its largest size); each is run
// once to warm up, then timed this many times, and compared by its median.
constexpr int64_t kAutotunePlans = 8;
constexpr int64_t kAutotuneWorkspaceFloor = int64_t{256} << 20;
constexpr int kAutotuneTimedRuns = 5;

// The tensors a call binds, by uid (the graph numbers its own tensors from 1000).
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kScale,
  kSeqLenQ,
  kSeqLenKV,
  kOffsetQ,  // Q, dQ and dQ's f32 accumulator
  kOffsetO,  // O, dO
  kOffsetK,  // K, dK
  kOffsetV,  // V, dV
  kOffsetStats,
  kSoftmaxSum,  // the backward's rowsum(dO ∘ O), in the workspace
  kDQAccum,     // the backward's f32 dQ, in the workspace
};

int64_t next_power_of_two(int64_t x) {
  int64_t p = 1;
  while (p < x) p *= 2;
  return p;
}

// How the sequences of a SeqLayout form cuDNN's batch: dense B × S, or ragged (B, S bounds; the
// nonempty sequences' starts and lengths, the rest of the B entries empty).
struct Batch {
  bool ragged = false;
  int64_t batch = 0, seq = 0;
  std::vector<int64_t> starts, lengths;
};

Batch batch_of(const SeqLayout& seqs) {
  Batch b;
  for (int64_t i = 0; i < seqs.num_seqs(); ++i) {
    if (seqs.end(i) == seqs.begin(i)) continue;
    b.starts.push_back(seqs.begin(i));
    b.lengths.push_back(seqs.end(i) - seqs.begin(i));
  }
  const int64_t count = static_cast<int64_t>(b.lengths.size());
  const int64_t longest = *std::max_element(b.lengths.begin(), b.lengths.end());
  const bool uniform = std::all_of(b.lengths.begin(), b.lengths.end(), [&](int64_t n) { return n == longest; });
  if (uniform && longest % kDenseMultiple == 0) {
    b.batch = count;
    b.seq = longest;
  } else {
    b.ragged = true;
    b.batch = next_power_of_two(count);
    b.seq = std::max(kShortestRaggedBound, next_power_of_two(longest));
  }
  return b;
}

// What a graph is built for: the batch shape, heads, head dim, window (0 = none) and layout.
struct Sizes {
  bool ragged = false;
  int64_t b = 0, s = 0, hq = 0, hk = 0, d = 0, window = 0;
  auto key() const { return std::make_tuple(ragged, b, s, hq, hk, d, window); }
  std::string describe() const {
    return std::string(ragged ? "ragged" : "dense") + " B " + std::to_string(b) + " S " + std::to_string(s) +
           " heads " + std::to_string(hq) + "/" + std::to_string(hk) + " d " + std::to_string(d) +
           (window > 0 ? " window " + std::to_string(window) : "");
  }
};

// A built graph, its plan, and the by-value scalars it binds (uid, value; never resized once built,
// so that their addresses stay valid for the variant packs). With autotuning, `rivals` holds the
// other candidate plans until the first call times them against `built` (the heuristics' choice
// until then) and keeps the fastest in `built`.
struct Plan {
  OpGraph graph;
  OpGraph::Plan built;
  std::vector<OpGraph::Plan> rivals;
  std::string skipped;  // candidates left out, and why (OpGraph::Candidates)
  double build_ms = 0;
  std::vector<std::pair<int64_t, float>> constants;

  bool untimed() const { return !rivals.empty(); }
  // The workspace the next call needs: the largest of the candidates' while some are untimed.
  int64_t workspace_bytes() const {
    int64_t bytes = built.workspace_bytes;
    for (const OpGraph::Plan& r : rivals) bytes = std::max(bytes, r.workspace_bytes);
    return bytes;
  }
};

// The graph-building vocabulary of the SDPA patterns over one Sizes.
class Builder {
 public:
  Builder(Plan& plan, const Sizes& z) : g_(plan.graph), constants_(plan.constants), z_(z) {}
  OpGraph& graph() { return g_; }

  // Rows of [N, heads·width] seen as [B, heads, S, width] (transposed: [B, heads, width, S]).
  TensorRef rows(int64_t uid, cudnnDataType_t type, int64_t heads, int64_t width, const TensorRef* offset,
                 bool transposed = false, bool is_virtual = false) {
    std::vector<int64_t> dims{z_.b, heads, z_.s, width}, strides{z_.s * heads * width, width, heads * width, 1};
    if (transposed) {
      std::swap(dims[2], dims[3]);
      std::swap(strides[2], strides[3]);
    }
    return g_.tensor({.type = type,
                      .dims = dims,
                      .strides = strides,
                      .is_virtual = is_virtual,
                      .ragged = z_.ragged ? offset : nullptr,
                      .uid = uid});
  }
  // [B, Hq, S, 1] statistics: in the workspace or bound, token-major with offsets when ragged
  // (the layout of lse), head-major when dense.
  TensorRef statistics(int64_t uid, const TensorRef* offset) {
    const int64_t hq = z_.hq, s = z_.s;
    return g_.tensor(
        {.type = CUDNN_DATA_FLOAT,
         .dims = {z_.b, hq, s, 1},
         .strides = z_.ragged ? std::vector<int64_t>{hq * s, 1, hq, 1} : std::vector<int64_t>{hq * s, s, 1, 1},
         .is_virtual = false,
         .ragged = z_.ragged ? offset : nullptr,
         .uid = uid});
  }
  TensorRef row_statistics() {  // virtual [B, Hq, S, 1]
    return g_.tensor({.dims = {z_.b, z_.hq, z_.s, 1}, .strides = {z_.hq * z_.s, z_.s, 1, 1}});
  }
  // Virtual [B, Hq, S, S] scores (transposed: column-major in the last two dims).
  TensorRef scores(cudnnDataType_t type = CUDNN_DATA_FLOAT, bool transposed = false) {
    const int64_t s = z_.s;
    return g_.tensor({.type = type,
                      .dims = {z_.b, z_.hq, s, s},
                      .strides = {z_.hq * s * s, s * s, transposed ? 1 : s, transposed ? s : 1}});
  }
  TensorRef per_batch(int64_t uid, cudnnDataType_t type, int64_t count) {
    return g_.tensor(
        {.type = type, .dims = {count, 1, 1, 1}, .strides = {1, 1, 1, 1}, .is_virtual = false, .uid = uid});
  }
  // A host scalar bound by address: `uid` (the caller binds it) or a constant of the plan.
  TensorRef scalar(float value, int64_t uid = 0) {
    const TensorRef t =
        g_.tensor({.dims = {1, 1, 1, 1}, .strides = {1, 1, 1, 1}, .is_virtual = false, .by_value = true, .uid = uid});
    if (uid == 0) constants_.emplace_back(t.uid, value);
    return t;
  }

  TensorRef unary(cudnnPointwiseMode_t mode, const TensorRef& x, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return g_.pointwise(mode, x, nullptr, nullptr, g_.virtual_like(x, type));
  }
  TensorRef binary(cudnnPointwiseMode_t mode, const TensorRef& x, const TensorRef& b,
                   cudnnDataType_t type = CUDNN_DATA_FLOAT, cudnnDataType_t math = CUDNN_DATA_FLOAT) {
    return g_.pointwise(mode, x, &b, nullptr, g_.virtual_like(x, type), math);
  }
  TensorRef index(const TensorRef& x, int64_t axis, cudnnDataType_t type, cudnnDataType_t math) {
    return g_.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, nullptr, nullptr, g_.virtual_like(x, type), math, axis);
  }
  // x where keep, −∞ elsewhere.
  TensorRef select(const TensorRef& x, const TensorRef& keep) {
    const TensorRef minus_infinity = scalar(-std::numeric_limits<float>::infinity());
    return g_.pointwise(CUDNN_POINTWISE_BINARY_SELECT, x, &minus_infinity, &keep, g_.virtual_like(x, CUDNN_DATA_FLOAT));
  }

  // Scores outside a document (row or column index past its length) → −∞.
  TensorRef padding_mask(const TensorRef& s, const TensorRef& seq_q, const TensorRef& seq_kv) {
    const TensorRef row = index(s, 2, CUDNN_DATA_INT32, CUDNN_DATA_INT32);
    const TensorRef col = index(s, 3, CUDNN_DATA_INT32, CUDNN_DATA_INT32);
    const TensorRef row_in = binary(CUDNN_POINTWISE_CMP_LT, row, seq_q, CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN);
    const TensorRef col_in = binary(CUDNN_POINTWISE_CMP_LT, col, seq_kv, CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN);
    return select(s, binary(CUDNN_POINTWISE_LOGICAL_AND, row_in, col_in, CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN));
  }
  // The causal diagonal (row ≥ column), then the window's left bound (column + window > row).
  TensorRef causal_mask(TensorRef s) {
    const TensorRef row = index(s, 2, CUDNN_DATA_INT32, CUDNN_DATA_FLOAT);
    const TensorRef col = index(s, 3, CUDNN_DATA_INT32, CUDNN_DATA_FLOAT);
    s = select(s, binary(CUDNN_POINTWISE_CMP_GE, row, col, CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN));
    if (z_.window == 0) return s;
    const TensorRef w_row = index(s, 2, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT);
    const TensorRef w_col = index(s, 3, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT);
    const TensorRef shifted = binary(CUDNN_POINTWISE_ADD, w_col, scalar(static_cast<float>(z_.window)));
    return select(s, binary(CUDNN_POINTWISE_CMP_GT, shifted, w_row, CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN));
  }

 private:
  OpGraph& g_;
  std::vector<std::pair<int64_t, float>>& constants_;
  Sizes z_;
};

// The bound tensors shared by both graphs: offsets and lengths (ragged only, else unset).
struct Layout {
  TensorRef offset_q, offset_o, offset_k, offset_v, offset_stats, seq_q, seq_kv;
  bool ragged = false;
  const TensorRef* q_lengths() const { return ragged ? &seq_q : nullptr; }
  const TensorRef* kv_lengths() const { return ragged ? &seq_kv : nullptr; }
};

Layout bind_layout(Builder& x, const Sizes& z) {
  Layout l;
  l.ragged = z.ragged;
  if (!z.ragged) return l;
  l.offset_q = x.per_batch(kOffsetQ, CUDNN_DATA_INT64, z.b + 1);
  l.offset_o = x.per_batch(kOffsetO, CUDNN_DATA_INT64, z.b + 1);
  l.offset_k = x.per_batch(kOffsetK, CUDNN_DATA_INT64, z.b + 1);
  l.offset_v = x.per_batch(kOffsetV, CUDNN_DATA_INT64, z.b + 1);
  l.offset_stats = x.per_batch(kOffsetStats, CUDNN_DATA_INT64, z.b + 1);
  l.seq_q = x.per_batch(kSeqLenQ, CUDNN_DATA_INT32, z.b);
  l.seq_kv = x.per_batch(kSeqLenKV, CUDNN_DATA_INT32, z.b);
  return l;
}

// S = scale · Q Kᵀ masked; lse = log Σ exp(S) (Stats); O = softmax(S) V.
void build_forward(Plan& plan, const Sizes& z) {
  Builder x(plan, z);
  OpGraph& g = x.graph();
  const Layout l = bind_layout(x, z);
  const TensorRef q = x.rows(kQ, CUDNN_DATA_BFLOAT16, z.hq, z.d, &l.offset_q);
  const TensorRef kt = x.rows(kK, CUDNN_DATA_BFLOAT16, z.hk, z.d, &l.offset_k, /*transposed=*/true);
  const TensorRef v = x.rows(kV, CUDNN_DATA_BFLOAT16, z.hk, z.d, &l.offset_v);
  const TensorRef o = x.rows(kO, CUDNN_DATA_BFLOAT16, z.hq, z.d, &l.offset_o);
  const TensorRef stats = x.statistics(kStats, &l.offset_stats);
  const TensorRef scale = x.scalar(0.0f, kScale);

  TensorRef s = g.matmul(q, kt, x.scores(), l.q_lengths(), l.kv_lengths());
  s = x.binary(CUDNN_POINTWISE_MUL, s, scale);
  if (z.ragged) s = x.padding_mask(s, l.seq_q, l.seq_kv);
  s = x.causal_mask(s);
  const TensorRef m = g.reduction(CUDNN_REDUCE_TENSOR_MAX, s, x.row_statistics());
  const TensorRef e = x.unary(CUDNN_POINTWISE_EXP, x.binary(CUDNN_POINTWISE_SUB, s, m));
  const TensorRef sum = g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, x.row_statistics());
  const TensorRef log_sum = x.unary(CUDNN_POINTWISE_LOG, sum);
  g.pointwise(CUDNN_POINTWISE_ADD, m, &log_sum, nullptr, stats);
  const TensorRef p = x.binary(CUDNN_POINTWISE_DIV, e, sum, CUDNN_DATA_BFLOAT16);
  g.matmul(p, v, o, l.q_lengths(), nullptr, l.kv_lengths());
}

// With P = exp(S − lse) and D = rowsum(dO ∘ O): dV = Pᵀ dO, dS = scale · P (dO Vᵀ − D),
// dK = dSᵀ Q, dQ = dS K (through an f32 accumulator); under GQA dK and dV are summed over the
// query heads of each kv head.
void build_backward(Plan& plan, const Sizes& z) {
  Builder x(plan, z);
  OpGraph& g = x.graph();
  const Layout l = bind_layout(x, z);
  const int64_t b = z.b, s_len = z.s, hq = z.hq, hk = z.hk, d = z.d;
  const TensorRef q = x.rows(kQ, CUDNN_DATA_BFLOAT16, hq, d, &l.offset_q);
  const TensorRef kt = x.rows(kK, CUDNN_DATA_BFLOAT16, hk, d, &l.offset_k, /*transposed=*/true);
  const TensorRef vt = x.rows(kV, CUDNN_DATA_BFLOAT16, hk, d, &l.offset_v, /*transposed=*/true);
  const TensorRef o = x.rows(kO, CUDNN_DATA_BFLOAT16, hq, d, &l.offset_o);
  const TensorRef dout = x.rows(kDO, CUDNN_DATA_BFLOAT16, hq, d, &l.offset_o);
  const TensorRef stats = x.statistics(kStats, &l.offset_stats);
  const TensorRef dq = x.rows(kDQ, CUDNN_DATA_BFLOAT16, hq, d, &l.offset_q);
  const TensorRef dk = x.rows(kDK, CUDNN_DATA_BFLOAT16, hk, d, &l.offset_k);
  const TensorRef dv = x.rows(kDV, CUDNN_DATA_BFLOAT16, hk, d, &l.offset_v);
  const TensorRef scale = x.scalar(0.0f, kScale);

  // D, kept in the workspace
  const TensorRef product =
      g.pointwise(CUDNN_POINTWISE_MUL, dout, &o, nullptr,
                  g.tensor({.dims = {b, hq, s_len, d}, .strides = {hq * s_len * d, s_len * d, hq * d, 1}}));
  const TensorRef row_sum = g.reduction(CUDNN_REDUCE_TENSOR_ADD, product, x.row_statistics());
  const TensorRef softmax_sum = x.statistics(kSoftmaxSum, &l.offset_stats);
  const TensorRef one = x.scalar(1.0f);
  g.pointwise(CUDNN_POINTWISE_MUL, row_sum, &one, nullptr, softmax_sum);

  // P
  TensorRef s = g.matmul(q, kt, x.scores(), l.q_lengths(), l.kv_lengths());
  s = x.binary(CUDNN_POINTWISE_MUL, s, scale);
  if (z.ragged) s = x.padding_mask(s, l.seq_q, l.seq_kv);
  s = x.binary(CUDNN_POINTWISE_SUB, s, stats);
  s = x.causal_mask(s);
  const TensorRef p = x.unary(CUDNN_POINTWISE_EXP, s);

  // dV (and dK below): [B, Hq, S, D] products, summed over each kv head's query heads under GQA.
  const auto key_gradient = [&](const TensorRef& weights_t, const TensorRef& rows, const TensorRef& out) {
    if (hq == hk) {
      g.matmul(weights_t, rows, out, l.kv_lengths(), nullptr, l.q_lengths());
      return;
    }
    const TensorRef full = g.matmul(
        weights_t, rows,
        g.tensor(
            {.type = CUDNN_DATA_BFLOAT16, .dims = {b, hq, s_len, d}, .strides = {hq * s_len * d, s_len * d, d, 1}}),
        l.kv_lengths(), nullptr, l.q_lengths());
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, full, out);
  };
  key_gradient(g.reshape(p, x.scores(CUDNN_DATA_BFLOAT16, /*transposed=*/true)), dout, dv);

  // dS
  const TensorRef dp = g.matmul(dout, vt, x.scores(), l.q_lengths(), l.kv_lengths());
  TensorRef ds = x.binary(CUDNN_POINTWISE_SUB, dp, softmax_sum);
  ds = x.binary(CUDNN_POINTWISE_MUL, ds, p);
  ds = x.binary(CUDNN_POINTWISE_MUL, ds, scale);
  key_gradient(g.reshape(ds, x.scores(CUDNN_DATA_BFLOAT16, /*transposed=*/true)), q, dk);

  // dQ
  const TensorRef k_rows = g.reshape(kt, x.rows(0, CUDNN_DATA_FLOAT, hk, d, &l.offset_k, false, /*is_virtual=*/true));
  const TensorRef accumulator = z.ragged ? x.rows(kDQAccum, CUDNN_DATA_FLOAT, hq, d, &l.offset_q)
                                         : g.tensor({.dims = {b, hq, s_len, d},
                                                     .strides = {hq * s_len * d, s_len * d, d, 1},
                                                     .is_virtual = false,
                                                     .uid = kDQAccum});
  g.matmul(ds, k_rows, accumulator, l.q_lengths(), nullptr, l.kv_lengths());
  g.pointwise(CUDNN_POINTWISE_IDENTITY, accumulator, nullptr, nullptr, dq);
}

// The most workspace an autotuning rival may take: two f32 copies of the queries (the backward
// engines that sum dQ in f32 of their own need about one: 257 MiB at B·T = 32768, 16 heads of 128,
// seen on an H100 with cuDNN 9.14), and never less than kAutotuneWorkspaceFloor.
int64_t autotune_workspace_limit(const Sizes& z) {
  return std::max(kAutotuneWorkspaceFloor, 2 * static_cast<int64_t>(sizeof(float)) * z.b * z.s * z.hq * z.d);
}

// The graph of one direction for `z`, with its plan for `target`: the heuristics' choice, and with
// `autotune` the other candidates as rivals; throws cudnn::Error.
std::unique_ptr<Plan> build(bool backward, const Sizes& z, const cudnn::Target& target, const std::string& what,
                            bool autotune) {
  auto plan = std::make_unique<Plan>();
  backward ? build_backward(*plan, z) : build_forward(*plan, z);
  OpGraph::Candidates found =
      plan->graph.build_plans(target, what, autotune ? kAutotunePlans : 1, autotune_workspace_limit(z));
  plan->built = std::move(found.plans.front());
  for (size_t i = 1; i < found.plans.size(); ++i) plan->rivals.push_back(std::move(found.plans[i]));
  plan->skipped = std::move(found.skipped);
  return plan;
}

// The log line of the plan that runs a shape (the same with and without autotuning).
void log_plan(const std::string& what, const Plan& plan, const std::string& how) {
  LOG(INFO) << "attention: " << what << ": cuDNN " << cudnn::version_string() << " plan " << how << " in "
            << static_cast<int64_t>(plan.build_ms) << " ms (" << plan.built.name() << ", workspace "
            << plan.built.workspace_bytes << " bytes"
            << (plan.built.nondeterministic ? ", marked nondeterministic" : "") << ")";
}

std::string describe(bool backward, const Sizes& z) {
  return std::string("cuDNN attention ") + (backward ? "backward" : "forward") + " (" + z.describe() + ")";
}

// Plans by (device, direction, sizes), built on first sight; a refusal is remembered as well.
struct PlanEntry {
  std::unique_ptr<Plan> plan;
  std::string refusal;
};

// Plans by (device, direction, autotuning, sizes): the plan cache key.
PlanEntry& plan_for(bool backward, const Sizes& z, bool autotune) {
  cudnnHandle_t h = cudnn::handle();  // first, so that the handle outlives the plans
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice (cuDNN attention)");
  thread_local std::map<decltype(std::tuple_cat(std::make_tuple(0, false, false), z.key())), PlanEntry> plans;
  PlanEntry& entry = plans[std::tuple_cat(std::make_tuple(device, backward, autotune), z.key())];
  if (entry.plan || !entry.refusal.empty()) return entry;
  const std::string what = describe(backward, z);
  const auto start = std::chrono::steady_clock::now();
  try {
    entry.plan = build(backward, z, {.handle = h}, what, autotune);
    entry.plan->build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    // With rivals to time, the first call logs the choice (autotune); else the plan runs as built.
    if (!entry.plan->untimed()) {
      const std::string& skipped = entry.plan->skipped;
      log_plan(what, *entry.plan,
               autotune
                   ? "built (autotuning: no other candidate" + (skipped.empty() ? "" : "; left out: " + skipped) + ")"
                   : "built");
    }
  } catch (const cudnn::Error& e) {
    entry.refusal = e.what();
  }
  return entry;
}

// CUDA events around each timed run, destroyed with the object.
class EventPair {
 public:
  EventPair() {
    check_cuda(cudaEventCreate(&start_), "cudaEventCreate (cuDNN autotuning)");
    if (const cudaError_t status = cudaEventCreate(&stop_); status != cudaSuccess) {
      cudaEventDestroy(start_);
      check_cuda(status, "cudaEventCreate (cuDNN autotuning)");
    }
  }
  ~EventPair() {
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;

  // Milliseconds that `run` takes on `stream`.
  template <class Run>
  double time(cudaStream_t stream, Run&& run) {
    check_cuda(cudaEventRecord(start_, stream), "cudaEventRecord (cuDNN autotuning)");
    run();
    check_cuda(cudaEventRecord(stop_, stream), "cudaEventRecord (cuDNN autotuning)");
    check_cuda(cudaEventSynchronize(stop_), "cudaEventSynchronize (cuDNN autotuning)");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime (cuDNN autotuning)");
    return ms;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

std::string format_ms(double ms) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f ms", ms);
  return text;
}

// Per-document lengths and element offsets of a ragged batch on the device, for the last layout
// seen by this thread on this device (the forward and backward of every layer of a step share it).
struct DeviceLayout {
  std::vector<int64_t> cu_seqlens;
  std::tuple<int64_t, int64_t, int64_t, int64_t> sizes;  // B, Hq, Hkv, D
  std::shared_ptr<void> memory;
  size_t bytes = 0;
  int32_t* lengths = nullptr;
  int64_t *offset_q = nullptr, *offset_kv = nullptr, *offset_stats = nullptr;
};

const DeviceLayout& device_layout(const SeqLayout& seqs, const Batch& batch, const Sizes& z) {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice (cuDNN attention)");
  thread_local std::map<int, DeviceLayout> layouts;
  DeviceLayout& l = layouts[device];
  const auto sizes = std::make_tuple(z.b, z.hq, z.hk, z.d);
  if (l.memory && l.cu_seqlens == seqs.cu_seqlens && l.sizes == sizes) return l;
  // lengths (int32, padded to 8 bytes), then three int64 offset arrays of B + 1 entries
  const size_t length_bytes = (static_cast<size_t>(z.b) * sizeof(int32_t) + 7) / 8 * 8;
  const size_t offsets = static_cast<size_t>(z.b + 1);
  const size_t bytes = length_bytes + 3 * offsets * sizeof(int64_t);
  std::vector<unsigned char> host(bytes);
  auto* lengths = reinterpret_cast<int32_t*>(host.data());
  auto* offset_q = reinterpret_cast<int64_t*>(host.data() + length_bytes);
  int64_t* offset_kv = offset_q + offsets;
  int64_t* offset_stats = offset_kv + offsets;
  const int64_t n = seqs.num_tokens();
  for (int64_t i = 0; i <= z.b; ++i) {
    const bool real = i < static_cast<int64_t>(batch.starts.size());
    const int64_t start = real ? batch.starts[static_cast<size_t>(i)] : n;
    if (i < z.b) lengths[i] = real ? static_cast<int32_t>(batch.lengths[static_cast<size_t>(i)]) : 0;
    offset_q[i] = start * z.hq * z.d;
    offset_kv[i] = start * z.hk * z.d;
    offset_stats[i] = start * z.hq;
  }
  if (l.bytes < bytes) {
    l.memory.reset();
    l.memory = allocate(bytes);
    l.bytes = bytes;
  }
  check_cuda(cudaMemcpy(l.memory.get(), host.data(), bytes, cudaMemcpyHostToDevice),
             "cudaMemcpy (cuDNN attention layout)");
  auto* base = static_cast<unsigned char*>(l.memory.get());
  l.lengths = reinterpret_cast<int32_t*>(base);
  l.offset_q = reinterpret_cast<int64_t*>(base + length_bytes);
  l.offset_kv = l.offset_q + offsets;
  l.offset_stats = l.offset_kv + offsets;
  l.cu_seqlens = seqs.cu_seqlens;
  l.sizes = sizes;
  return l;
}

// The tensors of one execution: uids and their addresses.
struct Bindings {
  std::vector<int64_t> uids;
  std::vector<void*> pointers;
  void bind(int64_t uid, const void* p) {
    uids.push_back(uid);
    pointers.push_back(const_cast<void*>(p));
  }
  void bind_plan(const Plan& plan) {
    for (const auto& [uid, value] : plan.constants) bind(uid, &value);
  }
  void bind_layout(const DeviceLayout& l) {
    bind(kSeqLenQ, l.lengths);
    bind(kSeqLenKV, l.lengths);
    bind(kOffsetQ, l.offset_q);
    bind(kOffsetO, l.offset_q);
    bind(kOffsetK, l.offset_kv);
    bind(kOffsetV, l.offset_kv);
    bind(kOffsetStats, l.offset_stats);
  }
};

// The plan that ran the calling thread's last call (OpGraph::Plan::name).
thread_local std::string last_plan;

// Autotuning on one call's own tensors (`bound`, and `workspace` of plan.workspace_bytes()): the
// heuristics' choice and each rival run once to warm up, then kAutotuneTimedRuns times between CUDA
// events on the handle's stream; the one of the least median time (the earlier in the heuristics'
// order on a tie) becomes plan.built, the rest are released, and one line logs every candidate's
// time and the choice. The runs write the call's outputs and only read its inputs (no output
// aliases an input: the fused kernels read the inputs while they write), so the caller's run of
// the chosen plan afterwards gives the call's result. A candidate that fails to run is left out;
// any other failure (CUDA events) keeps the heuristics' choice and says so; nothing throws.
void autotune(Plan& plan, const std::string& what, const Bindings& bound, void* workspace) {
  std::vector<OpGraph::Plan*> candidates{&plan.built};
  for (OpGraph::Plan& r : plan.rivals) candidates.push_back(&r);
  const auto start = std::chrono::steady_clock::now();
  size_t best = 0;
  std::string times;
  try {
    cudnnHandle_t h = cudnn::handle();
    cudaStream_t stream = nullptr;
    cudnn::check(cudnnGetStream(h, &stream), "cudnnGetStream (cuDNN autotuning)");
    EventPair events;
    double best_ms = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < candidates.size(); ++i) {
      const OpGraph::Plan& c = *candidates[i];
      const auto run = [&] {
        cudnn::execute(h, *c.plan, bound.uids, bound.pointers, workspace, what + " autotuning " + c.name());
      };
      times += (i ? ", " : "") + c.name() + (c.nondeterministic ? " [nondeterministic]" : "") + ": ";
      try {
        run();  // warm-up
        std::vector<double> ms;
        for (int r = 0; r < kAutotuneTimedRuns; ++r) ms.push_back(events.time(stream, run));
        std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2), ms.end());
        const double median = ms[ms.size() / 2];
        times += format_ms(median);
        if (median < best_ms) {
          best_ms = median;
          best = i;
        }
      } catch (const cudnn::Error& e) {
        times += std::string("failed to run (") + e.what() + ")";
      }
    }
    // Every run has finished before the plans that are not kept go.
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (cuDNN autotuning)");
  } catch (const std::exception& e) {
    LOG(WARNING) << "attention: " << what << ": cuDNN autotuning failed (" << e.what()
                 << "); keeping the heuristics' choice, " << plan.built.name();
    best = 0;
    // Best effort, as above (no plan goes while a run may be in flight); a CUDA error surfaces at the
    // call's own run.
    static_cast<void>(cudaDeviceSynchronize());
  }
  const std::string heuristics_choice = plan.built.name();
  if (best != 0) std::swap(plan.built, *candidates[best]);
  plan.rivals.clear();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  LOG(INFO) << "attention: " << what << ": cuDNN autotuning, " << candidates.size() << " plans timed in "
            << static_cast<int64_t>(ms) << " ms (median of " << kAutotuneTimedRuns
            << " runs after a warm-up): " << times << "; chose " << plan.built.name()
            << (best == 0 ? " (the heuristics' choice)" : ", not the heuristics' choice " + heuristics_choice)
            << (plan.skipped.empty() ? "" : "; left out: " + plan.skipped);
  log_plan(what, plan, "built (autotuned)");
}

// Why cuDNN cannot serve a call with these tensors and shape, before any graph is built ("" if
// nothing speaks against it).
std::string static_refusal(std::initializer_list<const Tensor*> tensors, const ops::AttentionShape& shape,
                           bool ragged) {
  if (cudnn::version() < kOldestVersion) {
    return "cuDNN " + cudnn::version_string() + " is older than 9.11, the oldest whose fused attention linea targets";
  }
  const DType dtype = (*tensors.begin())->dtype();
  if (dtype != DType::bf16) return "cuDNN's fused attention takes bf16 tensors, got " + std::string(dtype_name(dtype));
  if (shape.head_dim % 8 != 0 || shape.head_dim > kMaxHeadDim) {
    return "head_dim " + std::to_string(shape.head_dim) + " (cuDNN: a multiple of 8, at most 128)";
  }
  for (const Tensor* t : tensors) {
    if (reinterpret_cast<uintptr_t>(t->raw()) % 16 != 0) return "a tensor is not 16-byte aligned: " + t->describe();
  }
  if (ragged) {
    int device = 0, major = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice (cuDNN attention)");
    check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
               "cudaDeviceGetAttribute (cuDNN attention)");
    if (major < 9) return "ragged (packed-document) layouts need sm_90 or newer in cuDNN";
  }
  return "";
}

Sizes sizes_of(const Batch& batch, const ops::AttentionShape& shape, int64_t tokens) {
  return {batch.ragged,
          batch.batch,
          batch.seq,
          shape.q_heads,
          shape.kv_heads,
          shape.head_dim,
          shape.window >= tokens ? 0 : shape.window};  // a window past N limits nothing
}

// The plan for a call, or why there is none (refusal non-empty).
struct Prepared {
  Batch batch;
  Sizes sizes;
  Plan* plan = nullptr;
  std::string refusal;
};

Prepared prepare(bool backward, std::initializer_list<const Tensor*> tensors, const ops::AttentionShape& shape,
                 const SeqLayout& seqs) {
  Prepared p;
  p.batch = batch_of(seqs);
  p.sizes = sizes_of(p.batch, shape, seqs.num_tokens());
  try {
    p.refusal = static_refusal(tensors, shape, p.batch.ragged);
    if (!p.refusal.empty()) return p;
    const PlanEntry& entry = plan_for(backward, p.sizes, shape.cudnn_autotune);
    p.plan = entry.plan.get();
    p.refusal = entry.refusal;
  } catch (const cudnn::Error& e) {  // e.g. no handle for this device
    p.refusal = e.what();
  }
  return p;
}

size_t f32_bytes(int64_t count) { return static_cast<size_t>(count) * sizeof(float); }

// What both directions bind: Q, K, V, O, the statistics (at `stats`), the scale, the plan's
// constants and, for a ragged batch, the layout.
Bindings common_bindings(const Prepared& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                         const void* stats, const float* scale, const SeqLayout& seqs) {
  Bindings bound;
  bound.bind(kQ, q.raw());
  bound.bind(kK, k.raw());
  bound.bind(kV, v.raw());
  bound.bind(kO, out.raw());
  bound.bind(kStats, stats);
  bound.bind(kScale, scale);
  bound.bind_plan(*p.plan);
  if (p.sizes.ragged) bound.bind_layout(device_layout(seqs, p.batch, p.sizes));
  return bound;
}

}  // namespace

std::string cudnn_attention_forward(Tensor out, Tensor lse, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const ops::AttentionShape& shape, const SeqLayout& seqs) {
  const int64_t n = q.dim(0);
  if (n == 0) return "";
  const Prepared p = prepare(false, {&q, &k, &v, &out, &lse}, shape, seqs);
  if (!p.plan) return p.refusal;
  const Sizes& z = p.sizes;
  const std::vector<void*> pieces = scratch(
      {static_cast<size_t>(p.plan->workspace_bytes()), z.ragged ? 0 : f32_bytes(n * z.hq)});  // head-major statistics
  const float scale = static_cast<float>(shape.scale);
  const Bindings bound = common_bindings(p, q, k, v, out, z.ragged ? lse.raw() : pieces[1], &scale, seqs);
  if (p.plan->untimed()) autotune(*p.plan, describe(false, z), bound, pieces[0]);
  cudnn::execute(cudnn::handle(), *p.plan->built.plan, bound.uids, bound.pointers, pieces[0],
                 "cuDNN attention forward (" + z.describe() + ")");
  last_plan = p.plan->built.name();
  if (!z.ragged)
    lse_from_head_major(static_cast<float*>(lse.raw()), static_cast<const float*>(pieces[1]), z.b, z.s, z.hq);
  return "";
}

std::string cudnn_attention_backward(Tensor dq, Tensor dk, Tensor dv, const Tensor& dout, const Tensor& q,
                                     const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                                     const ops::AttentionShape& shape, const SeqLayout& seqs) {
  const int64_t n = q.dim(0);
  if (n == 0) return "";
  const Prepared p = prepare(true, {&q, &k, &v, &out, &dout, &lse, &dq, &dk, &dv}, shape, seqs);
  if (!p.plan) return p.refusal;
  const Sizes& z = p.sizes;
  // Ragged f32 rows (the accumulator, D) get one longest document of slack past the last token.
  const int64_t rows = z.ragged ? n + z.s : n;
  const std::vector<void*> pieces = scratch({static_cast<size_t>(p.plan->workspace_bytes()),
                                             f32_bytes(rows * z.hq),                // D
                                             f32_bytes(rows * z.hq * z.d),          // dQ accumulator
                                             z.ragged ? 0 : f32_bytes(n * z.hq)});  // head-major statistics
  if (!z.ragged)
    lse_to_head_major(static_cast<float*>(pieces[3]), static_cast<const float*>(lse.raw()), z.b, z.s, z.hq);
  const float scale = static_cast<float>(shape.scale);
  Bindings bound = common_bindings(p, q, k, v, out, z.ragged ? lse.raw() : pieces[3], &scale, seqs);
  bound.bind(kDO, dout.raw());
  bound.bind(kDQ, dq.raw());
  bound.bind(kDK, dk.raw());
  bound.bind(kDV, dv.raw());
  bound.bind(kSoftmaxSum, pieces[1]);
  bound.bind(kDQAccum, pieces[2]);
  if (p.plan->untimed()) autotune(*p.plan, describe(true, z), bound, pieces[0]);
  cudnn::execute(cudnn::handle(), *p.plan->built.plan, bound.uids, bound.pointers, pieces[0],
                 "cuDNN attention backward (" + z.describe() + ")");
  last_plan = p.plan->built.name();
  return "";
}

std::string cudnn_version_string() { return cudnn::version_string(); }

std::string cudnn_attention_plan_check(const std::string& device_json, bool backward, const ops::AttentionShape& shape,
                                       const SeqLayout& seqs) {
  const Sizes z = sizes_of(batch_of(seqs), shape, seqs.num_tokens());
  try {
    const cudnn::Descriptor device = cudnn::device_description(device_json);
    build(backward, z, {.device = &device}, describe(backward, z), /*autotune=*/false);
    return "";
  } catch (const cudnn::Error& e) {
    return e.what();
  }
}

std::vector<std::string> cudnn_attention_candidates(bool backward, const ops::AttentionShape& shape,
                                                    const SeqLayout& seqs) {
  const Sizes z = sizes_of(batch_of(seqs), shape, seqs.num_tokens());
  const std::unique_ptr<Plan> plan =
      build(backward, z, {.handle = cudnn::handle()}, describe(backward, z), shape.cudnn_autotune);
  std::vector<std::string> names{plan->built.name()};
  for (const OpGraph::Plan& r : plan->rivals) names.push_back(r.name());
  return names;
}

std::string cudnn_attention_last_plan() { return last_plan; }

}  // namespace linea::cuda

// Host side of the bf16 pipeline (model/mixers/delta_rule/cuda/delta_rule_bf16.h): the chunk table, the segments
// when the state passes run by segments, the workspaces of a call in one scratch request, and the
// order of its kernels.
//
// Segments: the state passes run one block per (sequence, head, 64 value columns), each walking its
// sequence's chunks in order. When some sequence has more than kSegmentChunks chunks and those
// blocks would not fill the device twice over, they run on the segments (runs of at most
// kSegmentChunks chunks of one sequence) as if each were a sequence, and the segments' affine
// transitions S_end = A S_start + B join them (delta_rule_bf16_segments.cu):
//   forward:  B by the state pass from S = 0 over each segment; A by the state pass over the K
//             columns of the identity with U = 0; S_start by the chain; then the pass itself from
//             each segment's S_start.
//   backward: the same S_start; C (the gradient at a segment's start from dS = 0 at its end) by the
//             reverse pass; dS_end by the reverse chain (Aᵀ); then the reverse pass itself from each
//             segment's dS_end.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/element_types.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/scratch.h"
#include "model/mixers/delta_rule/cuda/delta_rule_bf16.cuh"
#include "model/mixers/delta_rule/cuda/delta_rule_bf16.h"

namespace linea::cuda::delta {

namespace {

using bf16path::bf16;

template <class P>
P* pointer(const Tensor& t) {
  return t.defined() ? static_cast<P*>(t.raw()) : nullptr;
}

// The segment boundaries (in chunks, as a Chunks::seq_chunk) and each sequence's range of
// segments, or empty ones when the state passes need no segments.
struct SegmentTable {
  std::vector<int64_t> seg_chunk, seq_segment;
  int64_t count() const { return seg_chunk.empty() ? 0 : static_cast<int64_t>(seg_chunk.size()) - 1; }
};

SegmentTable segment_table(const std::vector<int64_t>& table, int64_t seqs, int heads, int value_dim) {
  const int64_t chunks = (static_cast<int64_t>(table.size()) - seqs - 1) / 2;
  const int64_t* seq_chunk = table.data() + 2 * chunks;
  int64_t longest = 0;
  for (int64_t s = 0; s < seqs; ++s) longest = std::max(longest, seq_chunk[s + 1] - seq_chunk[s]);
  const int64_t blocks = seqs * heads * ceil_div(value_dim, bf16path::kBV);
  SegmentTable t;
  if (longest <= bf16path::kSegmentChunks || blocks >= 2 * multiprocessor_count()) return t;
  t.seg_chunk.push_back(0);
  t.seq_segment.push_back(0);
  for (int64_t s = 0; s < seqs; ++s) {
    for (int64_t c = seq_chunk[s]; c < seq_chunk[s + 1]; c += bf16path::kSegmentChunks) {
      t.seg_chunk.push_back(std::min(c + bf16path::kSegmentChunks, seq_chunk[s + 1]));
    }
    t.seq_segment.push_back(static_cast<int64_t>(t.seg_chunk.size()) - 1);
  }
  return t;
}

// A call's problem and workspaces: the forward's output operands (Q', R; GDN-2's V'), or with
// `backward` the backward's buffers (Ũ, dŨ, h, dh; a decay per channel: scale Q ⊙ γ, scale P);
// with segments, their problem and buffers too.
struct Bf16Plan {
  bf16path::Problem problem{}, by_segment{};
  bf16path::Workspace ws{};
  // Segments: per segment and head, A [K, K], B (forward) or C (backward), and the chain's visits
  // S_start, dS_end [K, V]; seq_segment on the device.
  int64_t segments = 0;
  float *A = nullptr, *B = nullptr, *S_start = nullptr, *C = nullptr, *dS_end = nullptr;
  const int64_t* seq_segment = nullptr;

  Bf16Plan(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in, bool backward) {
    const Call call = describe_call(spec, in);
    const std::vector<int64_t> table = chunk_table(seqs);
    const int64_t chunks = (static_cast<int64_t>(table.size()) - seqs.num_seqs() - 1) / 2;
    const SegmentTable st = segment_table(table, seqs.num_seqs(), call.heads, call.value_dim);
    segments = st.count();
    const size_t rows = static_cast<size_t>(call.tokens) * call.heads;
    const size_t keys = rows * call.key_dim, values = rows * call.value_dim;
    const size_t pairs = static_cast<size_t>(chunks) * call.heads;
    const size_t states = pairs * call.key_dim * call.value_dim, b = sizeof(bf16), f = sizeof(float);
    const size_t tile = bf16path::kC * bf16path::kC * b;
    const size_t seg_pairs = static_cast<size_t>(segments) * call.heads;
    const size_t seg_kk = seg_pairs * call.key_dim * call.key_dim * f,
                 seg_kv = seg_pairs * call.key_dim * call.value_dim * f;
    const size_t seg_table = (st.seg_chunk.size() + st.seq_segment.size()) * sizeof(int64_t);
    const bool per_channel = spec.decay == ops::DecayKind::channel, gated = spec.gate == ops::GateKind::erase_write;
    std::vector<size_t> sizes = {table.size() * sizeof(int64_t),
                                 spec.decay == ops::DecayKind::scalar ? rows * f : 0,
                                 pairs * tile,
                                 keys * b,
                                 values * b,
                                 backward ? values * b : keys * b,      // Ũ, or Q'
                                 backward ? values * b : pairs * tile,  // dŨ, or R
                                 backward ? states * b : 0,             // h
                                 backward ? states * b : 0,             // dh
                                 seg_table,
                                 seg_kk,
                                 seg_kv,
                                 seg_kv,
                                 backward ? seg_kv : 0,
                                 backward ? seg_kv : 0,
                                 per_channel ? pairs * call.key_dim * f : 0,           // G_L
                                 per_channel ? keys * b : 0,                           // K ⊙ exp(G_L − G)
                                 per_channel && backward ? keys * b : 0,               // scale Q ⊙ γ
                                 per_channel && backward ? pairs * tile : 0,           // scale P
                                 per_channel && gated && !backward ? values * b : 0};  // w ⊙ V
    const std::vector<void*> p = scratch(sizes);
    problem = {static_cast<const bf16*>(call.q),
               static_cast<const bf16*>(call.k),
               static_cast<const bf16*>(call.v),
               static_cast<const bf16*>(call.beta),
               static_cast<const bf16*>(call.b),
               static_cast<const bf16*>(call.w),
               call.g,
               place_chunk_table(table, seqs.num_seqs(), p[0]),
               call.heads,
               call.key_dim,
               call.value_dim,
               call.scale,
               spec.decay,
               spec.gate};
    const auto at = [&](size_t i) { return sizes[i] ? static_cast<bf16*>(p[i]) : nullptr; };
    ws.G = sizes[1] ? static_cast<float*>(p[1]) : nullptr;
    ws.T = at(2), ws.W = at(3), ws.U = at(4);
    if (backward) {
      ws.Ut = at(5), ws.dUt = at(6), ws.h = at(7), ws.dh = at(8);
    } else {
      ws.Qe = at(5), ws.R = at(6);
    }
    ws.Glast = sizes[15] ? static_cast<float*>(p[15]) : nullptr;
    ws.Kend = at(16), ws.Qg = at(17), ws.P = at(18), ws.Vw = at(19);
    if (segments == 0) return;
    std::vector<int64_t> seg = st.seg_chunk;
    seg.insert(seg.end(), st.seq_segment.begin(), st.seq_segment.end());
    // Pageable memory: staged at once, without waiting for the device.
    check_cuda(cudaMemcpyAsync(p[9], seg.data(), seg_table, cudaMemcpyHostToDevice, 0),
               "cudaMemcpyAsync (segment table)");
    by_segment = problem;
    by_segment.chunks.seq_chunk = static_cast<const int64_t*>(p[9]);
    by_segment.chunks.seqs = segments;
    seq_segment = static_cast<const int64_t*>(p[9]) + st.seg_chunk.size();
    const auto f32 = [&](size_t i) { return static_cast<float*>(p[i]); };
    A = f32(10), B = f32(11), S_start = f32(12), C = f32(13), dS_end = f32(14);
  }

  // The workspace of the passes that make A, B or C: what the passes read, nothing stored.
  bf16path::Workspace transition_workspace() const {
    bf16path::Workspace t{};
    t.G = ws.G, t.Glast = ws.Glast, t.T = ws.T, t.W = ws.W, t.U = ws.U, t.Kend = ws.Kend, t.Qg = ws.Qg, t.P = ws.P;
    return t;
  }

  bf16path::Chain chain(const float* add, float* visited, const float* first, float* last) const {
    return {seq_segment, problem.chunks.seqs, problem.heads, problem.key_dim, problem.value_dim, A, add, visited, first,
            last};
  }

  // S_start of every segment (A, B on the way); ht when asked.
  void segment_starts(const float* h0, float* ht) const {
    const bf16path::Workspace t = transition_workspace();
    bf16path::state_forward(by_segment, t, nullptr, B, nullptr);
    bf16path::Workspace zero_u = t;
    zero_u.U = nullptr;  // U = 0 (stage_rows)
    bf16path::Problem identity = by_segment;
    identity.value_dim = problem.key_dim;
    bf16path::fill_identity(A, segments * problem.heads, problem.key_dim);
    bf16path::state_forward(identity, zero_u, A, A, nullptr);
    bf16path::chain(chain(B, S_start, h0, ht), false);
  }
};

}  // namespace

bool bf16_takes(const ops::DeltaRuleSpec& spec, const ops::DeltaRuleInputs& in,
                std::initializer_list<const Tensor*> tensors) {
  const int64_t K = in.q.dim(2), V = in.v.dim(2);
  if (in.q.dtype() != DType::bf16 || !bf16path::takes_kinds(spec.decay, spec.gate) || K > bf16path::kMaxKd ||
      K % 8 != 0 || V % 8 != 0 || V > bf16path::kMaxV || !aligned16({in.q.raw(), in.k.raw(), in.v.raw()})) {
    return false;
  }
  for (const Tensor* t : tensors) {
    if (t->defined() && !aligned16({t->raw()})) return false;
  }
  return !in.w.defined() || aligned16({in.w.raw()});
}

void bf16_forward(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in, Tensor o,
                  Tensor ht) {
  const Bf16Plan plan(spec, seqs, in, false);
  bf16path::intra(plan.problem, plan.ws);
  if (plan.segments == 0) {
    bf16path::state_forward(plan.problem, plan.ws, pointer<const float>(in.h0), pointer<float>(ht), pointer<bf16>(o));
    return;
  }
  plan.segment_starts(pointer<const float>(in.h0), pointer<float>(ht));
  bf16path::state_forward(plan.by_segment, plan.ws, plan.S_start, nullptr, pointer<bf16>(o));
}

void bf16_backward(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in,
                   const Tensor& d_o, const Tensor& dht, ops::DeltaRuleGrads& grads) {
  const Bf16Plan plan(spec, seqs, in, true);
  bf16path::intra(plan.problem, plan.ws);
  const bf16* d_out = pointer<const bf16>(d_o);
  if (plan.segments == 0) {
    bf16path::state_forward(plan.problem, plan.ws, pointer<const float>(in.h0), nullptr, nullptr);
    bf16path::state_backward(plan.problem, plan.ws, d_out, pointer<const float>(dht), pointer<float>(grads.dh0));
  } else {
    plan.segment_starts(pointer<const float>(in.h0), nullptr);
    bf16path::state_forward(plan.by_segment, plan.ws, plan.S_start, nullptr, nullptr);
    bf16path::state_backward(plan.by_segment, plan.transition_workspace(), d_out, nullptr, plan.C);
    bf16path::chain(plan.chain(plan.C, plan.dS_end, pointer<const float>(dht), pointer<float>(grads.dh0)), true);
    bf16path::state_backward(plan.by_segment, plan.ws, d_out, plan.dS_end, nullptr);
  }
  bf16path::gradients(
      plan.problem, plan.ws, d_out,
      {pointer<bf16>(grads.dq), pointer<bf16>(grads.dk), pointer<bf16>(grads.dv), pointer<bf16>(grads.dbeta),
       pointer<bf16>(grads.db), pointer<bf16>(grads.dw), pointer<float>(grads.dg)});
}

}  // namespace linea::cuda::delta

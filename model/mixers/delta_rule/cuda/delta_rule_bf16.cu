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
// RWKV-6's bonus readout (Bonus, Problem::u) changes only what intra stores (P, Q', Qg) and what
// gradients adds: the segments and their transitions read those as they are, so long sequences run
// by segments as any plain write does. Its du is the chunks' parts (Workspace::du_parts, a buffer
// of the backward) summed in a fixed order (add_partials). A saved buffer needs nothing more for
// the bonus: the kept Qg and P are intra's, with the bonus, and du_parts is the backward's own.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/column_sums.cuh"
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

// What a call's kernels need, in two requests: the buffers the forward can leave for the backward
// (`Kept`: G, T, W, U from intra; Ũ and h from the state pass; a decay per channel's G_L,
// K ⊙ exp(G_L − G), scale Q ⊙ γ and scale P; with segments, their transitions A) and the rest
// (`Passing`: the chunk and segment tables; the forward's output operands Q', R and GDN-2's w ⊙ V;
// the backward's dŨ and dh (and the bonus's du_parts); the segments' B, S_start, C and dS_end). A
// plain forward keeps only what its own passes read (no Ũ, h, scale Q ⊙ γ, scale P). A plain write
// has no T, W, U (V) and Ũ (V), and its dŨ is dv.
struct Bf16Sizes {
  enum Kept { kG, kT, kW, kU, kUt, kH, kGlast, kKend, kQg, kP, kA, kKeptCount };
  enum Passing { kTable, kSegTable, kQe, kR, kVw, kDUt, kDh, kDuParts, kB, kSStart, kC, kDSEnd, kPassingCount };
  std::vector<size_t> kept, passing;
  std::vector<int64_t> table;
  SegmentTable segments;

  // `saving`: the kept buffers live in a saved buffer (a forward that fills it, a backward that
  // reads it). Every kept buffer is sized for a forward that saves and for any backward.
  Bf16Sizes(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const Call& call, bool backward, bool saving,
            Write write, bool bonus)
      : kept(kKeptCount), passing(kPassingCount), table(chunk_table(seqs)) {
    const bool delta = write == Write::delta;
    const bool all_kept = backward || saving;
    const int64_t chunks = (static_cast<int64_t>(table.size()) - seqs.num_seqs() - 1) / 2;
    segments = segment_table(table, seqs.num_seqs(), call.heads, call.value_dim);
    const size_t rows = static_cast<size_t>(call.tokens) * call.heads;
    const size_t keys = rows * call.key_dim, values = rows * call.value_dim;
    const size_t pairs = static_cast<size_t>(chunks) * call.heads;
    const size_t states = pairs * call.key_dim * call.value_dim, b = sizeof(bf16), f = sizeof(float);
    const size_t tile = bf16path::kC * bf16path::kC * b;
    const size_t seg_pairs = static_cast<size_t>(segments.count()) * call.heads;
    const size_t seg_kv = seg_pairs * call.key_dim * call.value_dim * f;
    const bool per_channel = spec.decay == ops::DecayKind::channel, gated = spec.gate == ops::GateKind::erase_write;
    const bool segmented = segments.count() > 0;
    kept[kG] = spec.decay == ops::DecayKind::scalar ? rows * f : 0;
    kept[kT] = delta ? pairs * tile : 0;
    kept[kW] = delta ? keys * b : 0;
    kept[kU] = delta ? values * b : 0;
    kept[kUt] = delta && all_kept ? values * b : 0;
    kept[kH] = all_kept ? states * b : 0;
    kept[kGlast] = per_channel ? pairs * call.key_dim * f : 0;
    kept[kKend] = per_channel ? keys * b : 0;
    kept[kQg] = per_channel && all_kept ? keys * b : 0;
    kept[kP] = per_channel && all_kept ? pairs * tile : 0;
    kept[kA] = seg_pairs * call.key_dim * call.key_dim * f;
    passing[kTable] = table.size() * sizeof(int64_t);
    passing[kSegTable] = (segments.seg_chunk.size() + segments.seq_segment.size()) * sizeof(int64_t);
    passing[kQe] = backward ? 0 : keys * b;
    passing[kR] = backward ? 0 : pairs * tile;
    passing[kVw] = per_channel && gated && !backward ? values * b : 0;
    passing[kDUt] = delta && backward ? values * b : 0;
    passing[kDh] = backward ? states * b : 0;
    passing[kDuParts] = bonus && backward ? pairs * call.key_dim * f : 0;
    // B and S_start: the forward's segment starts, which a backward without saved buffers makes again
    passing[kB] = passing[kSStart] = segmented && !(backward && saving) ? seg_kv : 0;
    passing[kC] = passing[kDSEnd] = segmented && backward ? seg_kv : 0;
  }
};

// A call's problem and workspaces (Bf16Sizes), the kept buffers in `saved` where given.
struct Bf16Plan {
  bf16path::Problem problem{}, by_segment{};
  bf16path::Workspace ws{};
  // Segments: per segment and head, A [K, K], B (forward) or C (backward), and the chain's visits
  // S_start, dS_end [K, V]; seq_segment on the device.
  int64_t segments = 0;
  float *A = nullptr, *B = nullptr, *S_start = nullptr, *C = nullptr, *dS_end = nullptr;
  const int64_t* seq_segment = nullptr;

  // A backward with `saved` reads the kept buffers a forward with the same `saved` wrote. `u`: the
  // bonus (Problem::u), or null.
  Bf16Plan(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in, bool backward,
           void* saved, Write write, const float* u) {
    if (u && (write != Write::plain || spec.decay != ops::DecayKind::channel)) {
      throw std::invalid_argument(
          "delta_rule bf16 pipeline: the bonus readout is a plain write with a decay per channel");
    }
    const Call call = describe_call(spec, in);
    const Bf16Sizes sizes(spec, seqs, call, backward, saved != nullptr, write, u != nullptr);
    segments = sizes.segments.count();
    std::vector<size_t> request = sizes.passing;
    if (!saved) request.insert(request.end(), sizes.kept.begin(), sizes.kept.end());
    const std::vector<void*> pass = scratch(request);
    const std::vector<void*> kept =
        saved ? carve(saved, sizes.kept) : std::vector<void*>(pass.begin() + Bf16Sizes::kPassingCount, pass.end());
    problem = {static_cast<const bf16*>(call.q),
               static_cast<const bf16*>(call.k),
               static_cast<const bf16*>(call.v),
               static_cast<const bf16*>(call.beta),
               static_cast<const bf16*>(call.b),
               static_cast<const bf16*>(call.w),
               call.g,
               in.g.defined() && in.g.ndim() == 1 ? 0 : call.heads,  // [H]: one decay per head
               place_chunk_table(sizes.table, seqs.num_seqs(), pass[Bf16Sizes::kTable]),
               call.heads,
               call.key_dim,
               call.value_dim,
               call.scale,
               spec.decay,
               spec.gate,
               write == Write::plain,
               u};
    const auto k = [&](int i) { return sizes.kept[i] ? kept[i] : nullptr; };
    const auto p = [&](int i) { return sizes.passing[i] ? pass[i] : nullptr; };
    const auto k16 = [&](int i) { return static_cast<bf16*>(k(i)); };
    const auto p16 = [&](int i) { return static_cast<bf16*>(p(i)); };
    ws.G = static_cast<float*>(k(Bf16Sizes::kG));
    ws.T = k16(Bf16Sizes::kT), ws.W = k16(Bf16Sizes::kW), ws.U = k16(Bf16Sizes::kU);
    ws.Ut = k16(Bf16Sizes::kUt), ws.h = k16(Bf16Sizes::kH);
    ws.Glast = static_cast<float*>(k(Bf16Sizes::kGlast));
    ws.Kend = k16(Bf16Sizes::kKend), ws.Qg = k16(Bf16Sizes::kQg), ws.P = k16(Bf16Sizes::kP);
    ws.Qe = p16(Bf16Sizes::kQe), ws.R = p16(Bf16Sizes::kR), ws.Vw = p16(Bf16Sizes::kVw);
    ws.dUt = p16(Bf16Sizes::kDUt), ws.dh = p16(Bf16Sizes::kDh);
    ws.du_parts = static_cast<float*>(p(Bf16Sizes::kDuParts));
    if (problem.plain) ws.U = const_cast<bf16*>(problem.v);  // U = V, read only
    if (segments == 0) return;
    std::vector<int64_t> seg = sizes.segments.seg_chunk;
    seg.insert(seg.end(), sizes.segments.seq_segment.begin(), sizes.segments.seq_segment.end());
    // Pageable memory: staged at once, without waiting for the device.
    check_cuda(cudaMemcpyAsync(pass[Bf16Sizes::kSegTable], seg.data(), sizes.passing[Bf16Sizes::kSegTable],
                               cudaMemcpyHostToDevice, 0),
               "cudaMemcpyAsync (segment table)");
    by_segment = problem;
    by_segment.chunks.seq_chunk = static_cast<const int64_t*>(pass[Bf16Sizes::kSegTable]);
    by_segment.chunks.seqs = segments;
    seq_segment = by_segment.chunks.seq_chunk + sizes.segments.seg_chunk.size();
    const auto f32 = [](void* x) { return static_cast<float*>(x); };
    A = f32(k(Bf16Sizes::kA)), B = f32(p(Bf16Sizes::kB)), S_start = f32(p(Bf16Sizes::kSStart));
    C = f32(p(Bf16Sizes::kC)), dS_end = f32(p(Bf16Sizes::kDSEnd));
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
                std::initializer_list<const Tensor*> tensors, Write write) {
  const int64_t K = in.q.dim(2), V = in.v.dim(2);
  const bool kinds = write == Write::plain ? spec.gate == ops::GateKind::beta && !in.beta.defined()
                                           : bf16path::takes_kinds(spec.decay, spec.gate);
  if (in.q.dtype() != DType::bf16 || !kinds || K > bf16path::kMaxKd || K % 8 != 0 || V % 8 != 0 ||
      V > bf16path::kMaxV || !aligned16({in.q.raw(), in.k.raw(), in.v.raw()})) {
    return false;
  }
  for (const Tensor* t : tensors) {
    if (t->defined() && !aligned16({t->raw()})) return false;
  }
  return !in.w.defined() || aligned16({in.w.raw()});
}

void* bf16_saved_memory(const Tensor& saved, bool takes, const char* op, const char* refusal) {
  if (!saved.defined()) return nullptr;
  if (!takes || reinterpret_cast<uintptr_t>(saved.raw()) % 256 != 0) {
    throw std::invalid_argument(std::string(op) + ": saved: " + refusal);
  }
  return saved.raw();
}

size_t bf16_saved_bytes(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in,
                        Write write) {
  return carved_bytes(Bf16Sizes(spec, seqs, describe_call(spec, in), false, true, write, false).kept);
}

void bf16_forward(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in, Tensor o,
                  Tensor ht, void* saved, Write write, const Bonus& bonus) {
  const Bf16Plan plan(spec, seqs, in, false, saved, write, pointer<const float>(bonus.u));
  bf16path::intra(plan.problem, plan.ws);
  if (plan.segments == 0) {
    bf16path::state_forward(plan.problem, plan.ws, pointer<const float>(in.h0), pointer<float>(ht), pointer<bf16>(o));
    return;
  }
  plan.segment_starts(pointer<const float>(in.h0), pointer<float>(ht));
  bf16path::state_forward(plan.by_segment, plan.ws, plan.S_start, nullptr, pointer<bf16>(o));
}

void bf16_backward(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in,
                   const Tensor& d_o, const Tensor& dht, ops::DeltaRuleGrads& grads, const void* saved, Write write,
                   const Bonus& bonus) {
  // The backward only reads the kept buffers when they come from the forward.
  Bf16Plan plan(spec, seqs, in, true, const_cast<void*>(saved), write, pointer<const float>(bonus.u));
  if (plan.problem.plain) plan.ws.dUt = pointer<bf16>(grads.dv);  // dv = dŨ
  if (!saved) bf16path::intra(plan.problem, plan.ws);
  const bf16* d_out = pointer<const bf16>(d_o);
  if (plan.segments == 0) {
    if (!saved) bf16path::state_forward(plan.problem, plan.ws, pointer<const float>(in.h0), nullptr, nullptr);
    bf16path::state_backward(plan.problem, plan.ws, d_out, pointer<const float>(dht), pointer<float>(grads.dh0));
  } else {
    if (!saved) {
      plan.segment_starts(pointer<const float>(in.h0), nullptr);
      bf16path::state_forward(plan.by_segment, plan.ws, plan.S_start, nullptr, nullptr);
    }
    bf16path::state_backward(plan.by_segment, plan.transition_workspace(), d_out, nullptr, plan.C);
    bf16path::chain(plan.chain(plan.C, plan.dS_end, pointer<const float>(dht), pointer<float>(grads.dh0)), true);
    bf16path::state_backward(plan.by_segment, plan.ws, d_out, plan.dS_end, nullptr);
  }
  bf16path::Workspace for_gradients = plan.ws;
  if (plan.problem.plain) for_gradients.Ut = plan.ws.U;  // Ũ = V
  bf16path::gradients(
      plan.problem, for_gradients, d_out,
      {pointer<bf16>(grads.dq), pointer<bf16>(grads.dk), pointer<bf16>(grads.dv), pointer<bf16>(grads.dbeta),
       pointer<bf16>(grads.db), pointer<bf16>(grads.dw), pointer<float>(grads.dg)});
  if (plan.problem.u) {  // du = Σ over the chunks of their parts, in a fixed order
    float* const du = pointer<float>(bonus.du);
    const int64_t width = int64_t{plan.problem.heads} * plan.problem.key_dim;
    check_cuda(cudaMemsetAsync(du, 0, static_cast<size_t>(width) * sizeof(float), 0), "cudaMemsetAsync (du)");
    add_partials(du, plan.ws.du_parts, plan.problem.chunks.count, width);
  }
}

}  // namespace linea::cuda::delta

// Host side of the CUDA delta rule: the table of chunks (64 tokens, never across a sequence), the
// f32 pipeline's workspaces (one scratch request per call) and the order of its kernels (the
// pipeline is in model/mixers/delta_rule/cuda/delta_rule_chunk.cuh). bf16 calls run the tensor-core
// pipeline (model/mixers/delta_rule/cuda/delta_rule_bf16.h); the few it does not take (K or V not
// a multiple of 8, K > 256 or V > 512, tensors not 16-byte aligned, GDN-2's gates without a decay
// per channel) run the f32 pipeline on f32 copies of their token operands, their results rounded
// to bf16 once. So do the bf16 calls with the write error r (or its gradient dr): only the f32
// pipeline forms r (delta_rule_write_error.cu).
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/scratch.h"
#include "kernels/ops.h"
#include "model/mixers/delta_rule/cuda/delta_rule.h"
#include "model/mixers/delta_rule/cuda/delta_rule_bf16.h"
#include "model/mixers/delta_rule/cuda/delta_rule_chunk.cuh"

namespace linea::cuda {

namespace delta {

void allow_shared_memory(const void* kernel, size_t bytes) {
  int device = 0, limit = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "cudaDeviceGetAttribute(shared memory per block)");
  if (bytes > static_cast<size_t>(limit)) {
    throw std::runtime_error("delta_rule: a kernel needs " + std::to_string(bytes) +
                             " bytes of shared memory; the device allows " + std::to_string(limit));
  }
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
             "cudaFuncSetAttribute(max dynamic shared memory)");
  // The whole carveout for shared memory: these kernels stage their operands there (cp.async.cg
  // bypasses L1), and a block count a multiprocessor that the tiles allow needs all of it.
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                  static_cast<int>(cudaSharedmemCarveoutMaxShared)),
             "cudaFuncSetAttribute(shared memory carveout)");
}

Call describe_call(const ops::DeltaRuleSpec& spec, const ops::DeltaRuleInputs& in) {
  Call call;
  call.decay = spec.decay;
  call.gate = spec.gate;
  call.q = in.q.raw(), call.k = in.k.raw(), call.v = in.v.raw();
  call.beta = in.beta.defined() ? in.beta.raw() : nullptr;
  call.b = in.b.defined() ? in.b.raw() : nullptr;
  call.w = in.w.defined() ? in.w.raw() : nullptr;
  call.g = in.g.defined() ? static_cast<const float*>(in.g.raw()) : nullptr;
  call.tokens = in.q.dim(0);
  call.heads = static_cast<int>(in.q.dim(1));
  call.key_dim = static_cast<int>(in.q.dim(2));
  call.value_dim = static_cast<int>(in.v.dim(2));
  call.scale = static_cast<float>(spec.scale);
  return call;
}

std::vector<int64_t> chunk_table(const SeqLayout& seqs) {
  std::vector<int64_t> first, end, seq_chunk{0};
  for (int64_t s = 0; s < seqs.num_seqs(); ++s) {
    for (int64_t t = seqs.begin(s); t < seqs.end(s); t += kChunk) {
      first.push_back(t);
      end.push_back(std::min(t + kChunk, seqs.end(s)));
    }
    seq_chunk.push_back(static_cast<int64_t>(first.size()));
  }
  std::vector<int64_t> table = first;
  table.insert(table.end(), end.begin(), end.end());
  table.insert(table.end(), seq_chunk.begin(), seq_chunk.end());
  return table;
}

Chunks place_chunk_table(const std::vector<int64_t>& table, int64_t seqs, void* device) {
  // Pageable memory: staged at once, without waiting for the device.
  check_cuda(cudaMemcpyAsync(device, table.data(), table.size() * sizeof(int64_t), cudaMemcpyHostToDevice, 0),
             "cudaMemcpyAsync (chunk table)");
  const int64_t chunks = (static_cast<int64_t>(table.size()) - seqs - 1) / 2;
  const int64_t* t = static_cast<const int64_t*>(device);
  return {t, t + chunks, t + 2 * chunks, chunks, seqs};
}

namespace {

// The call, its chunk table on the device and its f32 workspaces, from one scratch request.
struct Plan {
  Call call;
  Workspace ws{};
  GradWorkspace gws{};

  // dr: ∂L/∂r of a backward, or null: with GateKind::beta, the state pass then reads gws.KgNeg.
  Plan(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in, bool backward,
       const float* dr = nullptr)
      : call(describe_call(spec, in)) {
    const std::vector<int64_t> table = chunk_table(seqs);
    const int64_t chunks = (static_cast<int64_t>(table.size()) - seqs.num_seqs() - 1) / 2;
    const size_t f = sizeof(float);
    const size_t rows = static_cast<size_t>(call.tokens) * call.heads;
    const size_t keys = rows * call.key_dim, values = rows * call.value_dim;
    const size_t tiles = static_cast<size_t>(chunks) * call.heads * kChunk * kChunk;
    const size_t states = static_cast<size_t>(chunks) * call.heads * call.key_dim * call.value_dim;
    const size_t decays = spec.decay == ops::DecayKind::channel  ? keys
                          : spec.decay == ops::DecayKind::scalar ? rows
                                                                 : 0;
    std::vector<size_t> sizes = {table.size() * sizeof(int64_t),
                                 decays * f,
                                 values * f,
                                 values * f,
                                 keys * f,
                                 keys * f,
                                 keys * f,
                                 tiles * f,
                                 tiles * f,
                                 states * f};
    const bool error_rows = dr && spec.gate == ops::GateKind::beta;
    if (backward) {
      for (size_t bytes : {values, states, values, keys, keys, keys, keys, keys, keys, keys})
        sizes.push_back(bytes * f);
      if (error_rows) sizes.push_back(keys * f);
    }
    const std::vector<void*> p = scratch(sizes);
    call.chunks = place_chunk_table(table, seqs.num_seqs(), p[0]);
    const auto at = [&](size_t i) { return static_cast<float*>(p[i]); };
    ws = {at(1), at(2), at(3), at(4), at(5), at(6), at(7), at(8), at(9)};
    if (backward) gws = {at(10), at(11), at(12), at(13), at(14), at(15), at(16), at(17), at(18), at(19)};
    if (error_rows) {
      gws.KgNeg = at(20);
      gws.dR = dr;
    }
  }
};

template <class P = float>
P* pointer(const Tensor& t) {
  return t.defined() ? static_cast<P*>(t.raw()) : nullptr;
}

}  // namespace
}  // namespace delta

namespace delta {
namespace {

// r (may be undefined): the write error, after the output.
void f32_forward(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in, Tensor o,
                 Tensor ht, Tensor r) {
  const Plan plan(spec, seqs, in, false);
  intra_chunk(plan.call, plan.ws);
  state_forward(plan.call, plan.ws, pointer(in.h0), pointer(ht));
  output(plan.call, plan.ws, o.raw());
  if (r.defined()) write_error(plan.call, plan.ws, pointer(r));
}

// dr (may be undefined): ∂L/∂r, folded into dŨ (before the state pass), ∂L/∂S0 (in it) and dv, dk,
// dg (after the chunk gradients).
void f32_backward(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in,
                  const Tensor& d_o, const Tensor& dht, ops::DeltaRuleGrads& grads, const Tensor& dr) {
  const float* const d_r = pointer<const float>(dr);
  const Plan plan(spec, seqs, in, true, d_r);
  intra_chunk(plan.call, plan.ws);
  state_forward(plan.call, plan.ws, pointer(in.h0), nullptr);
  written_local(plan.call, plan.ws, d_o.raw(), plan.gws);
  if (d_r) write_error_local(plan.call, plan.ws, d_r, plan.gws);
  state_backward(plan.call, plan.ws, d_o.raw(), pointer(dht), plan.gws, pointer(grads.dh0));
  const GradientOutputs out{
      grads.dq.raw(),          grads.dk.raw(),          grads.dv.raw(),   pointer<void>(grads.dbeta),
      pointer<void>(grads.db), pointer<void>(grads.dw), pointer(grads.dg)};
  chunk_gradients(plan.call, plan.ws, d_o.raw(), plan.gws, out);
  if (d_r) write_error_gradients(plan.call, plan.ws, d_r, out);
}

// An f32 tensor shaped like t (undefined for undefined), and one holding t's values.
Tensor f32_like(const Tensor& t) { return t.defined() ? Tensor::empty(t.shape(), DType::f32, Device::cuda) : Tensor(); }
Tensor f32_copy(const Tensor& t) {
  Tensor c = f32_like(t);
  if (c.defined()) ops::convert(c, t);
  return c;
}
ops::DeltaRuleInputs f32_inputs(const ops::DeltaRuleInputs& in) {
  ops::DeltaRuleInputs c = in;  // g and h0 are f32 already
  for (Tensor* t : {&c.q, &c.k, &c.v, &c.beta, &c.b, &c.w}) *t = f32_copy(*t);
  return c;
}

// A saved buffer's refusal: only the bf16 pipeline saves (bf16_saved_memory).
constexpr const char* kSavedRefusal =
    "only a bf16 call with 16-byte aligned tensors (delta_rule_saved_bytes > 0) and without the write error r or dr "
    "saves its intermediates, into 256-byte aligned memory";
}  // namespace
}  // namespace delta

size_t delta_rule_saved_bytes(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in) {
  return in.q.dtype() == DType::bf16 && delta::bf16_takes(spec, in, {}, delta::Write::delta)
             ? delta::bf16_saved_bytes(spec, seqs, in, delta::Write::delta)
             : 0;
}

void delta_rule_forward(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in, Tensor o,
                        Tensor ht, Tensor r, Tensor saved) {
  const bool bf16 =
      in.q.dtype() == DType::bf16 && !r.defined() && delta::bf16_takes(spec, in, {&o}, delta::Write::delta);
  void* const keep = delta::bf16_saved_memory(saved, bf16, "delta_rule_forward", delta::kSavedRefusal);
  if (in.q.dtype() == DType::f32) return delta::f32_forward(spec, seqs, in, o, ht, r);
  if (bf16) return delta::bf16_forward(spec, seqs, in, o, ht, keep, delta::Write::delta);
  const Tensor o32 = delta::f32_like(o), r32 = delta::f32_like(r);
  delta::f32_forward(spec, seqs, delta::f32_inputs(in), o32, ht, r32);
  ops::convert(o, o32);
  if (r.defined()) ops::convert(r, r32);
}

void delta_rule_backward(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in,
                         const Tensor& d_o, const Tensor& dht, ops::DeltaRuleGrads& grads, const Tensor& dr,
                         const Tensor& saved) {
  const bool bf16 =
      in.q.dtype() == DType::bf16 && !dr.defined() &&
      delta::bf16_takes(spec, in, {&d_o, &grads.dq, &grads.dk, &grads.dv, &grads.db, &grads.dw}, delta::Write::delta);
  const void* const kept = delta::bf16_saved_memory(saved, bf16, "delta_rule_backward", delta::kSavedRefusal);
  if (in.q.dtype() == DType::f32) return delta::f32_backward(spec, seqs, in, d_o, dht, grads, dr);
  if (bf16) return delta::bf16_backward(spec, seqs, in, d_o, dht, grads, kept, delta::Write::delta);
  ops::DeltaRuleGrads g32 = grads;  // dg and dh0 are f32 already
  for (Tensor* t : {&g32.dq, &g32.dk, &g32.dv, &g32.dbeta, &g32.db, &g32.dw}) *t = delta::f32_like(*t);
  delta::f32_backward(spec, seqs, delta::f32_inputs(in), delta::f32_copy(d_o), dht, g32, delta::f32_copy(dr));
  for (auto [to, from] : {std::pair{&grads.dq, &g32.dq},
                          {&grads.dk, &g32.dk},
                          {&grads.dv, &g32.dv},
                          {&grads.dbeta, &g32.dbeta},
                          {&grads.db, &g32.db},
                          {&grads.dw, &g32.dw}}) {
    if (to->defined()) ops::convert(*to, *from);
  }
}

}  // namespace linea::cuda

// Host side of the bf16 pipeline (kernels/cuda/delta_rule_bf16.h): the chunk table and the
// workspaces of a call in one scratch request, and the order of its kernels.
#include <vector>

#include "kernels/cuda/delta_rule_bf16.cuh"
#include "kernels/cuda/delta_rule_bf16.h"
#include "kernels/cuda/element_types.cuh"
#include "kernels/cuda/scratch.h"

namespace linea::cuda::delta {

namespace {

using bf16path::bf16;

template <class P>
P* pointer(const Tensor& t) {
  return t.defined() ? static_cast<P*>(t.raw()) : nullptr;
}

// A call's problem and workspaces: the forward's output operands (Q', R), or with `backward` the
// backward's buffers (Ũ, dŨ, h, dh).
struct Bf16Plan {
  bf16path::Problem problem{};
  bf16path::Workspace ws{};

  Bf16Plan(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in, bool backward) {
    const Call call = describe_call(spec, in);
    const std::vector<int64_t> table = chunk_table(seqs);
    const int64_t chunks = (static_cast<int64_t>(table.size()) - seqs.num_seqs() - 1) / 2;
    const size_t rows = static_cast<size_t>(call.tokens) * call.heads;
    const size_t keys = rows * call.key_dim, values = rows * call.value_dim;
    const size_t pairs = static_cast<size_t>(chunks) * call.heads;
    const size_t states = pairs * call.key_dim * call.value_dim, b = sizeof(bf16);
    std::vector<size_t> sizes = {table.size() * sizeof(int64_t), call.g ? rows * sizeof(float) : 0,
                                 pairs * bf16path::kC * bf16path::kC * b, keys * b, values * b};
    if (backward) {
      for (size_t bytes : {values * b, values * b, states * b, states * b}) sizes.push_back(bytes);
    } else {
      for (size_t bytes : {keys * b, pairs * bf16path::kC * bf16path::kC * b}) sizes.push_back(bytes);
    }
    const std::vector<void*> p = scratch(sizes);
    problem = {static_cast<const bf16*>(call.q),
               static_cast<const bf16*>(call.k),
               static_cast<const bf16*>(call.v),
               static_cast<const bf16*>(call.beta),
               call.g,
               place_chunk_table(table, seqs.num_seqs(), p[0]),
               call.heads,
               call.key_dim,
               call.value_dim,
               call.scale};
    const auto at = [&](size_t i) { return static_cast<bf16*>(p[i]); };
    ws.G = call.g ? static_cast<float*>(p[1]) : nullptr;
    ws.T = at(2), ws.W = at(3), ws.U = at(4);
    if (backward) {
      ws.Ut = at(5), ws.dUt = at(6), ws.h = at(7), ws.dh = at(8);
    } else {
      ws.Qe = at(5), ws.R = at(6);
    }
  }
};

}  // namespace

bool bf16_takes(const ops::DeltaRuleSpec& spec, const ops::DeltaRuleInputs& in,
                std::initializer_list<const Tensor*> tensors) {
  const int64_t K = in.q.dim(2), V = in.v.dim(2);
  if (in.q.dtype() != DType::bf16 || spec.decay == ops::DecayKind::channel || spec.gate != ops::GateKind::beta ||
      K > bf16path::kMaxKd || K % 8 != 0 || V % 8 != 0 || V > bf16path::kMaxV ||
      !aligned16({in.q.raw(), in.k.raw(), in.v.raw()})) {
    return false;
  }
  for (const Tensor* t : tensors) {
    if (!aligned16({t->raw()})) return false;
  }
  return true;
}

void bf16_forward(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in, Tensor o,
                  Tensor ht) {
  const Bf16Plan plan(spec, seqs, in, false);
  bf16path::intra(plan.problem, plan.ws);
  bf16path::state_forward(plan.problem, plan.ws, pointer<const float>(in.h0), pointer<float>(ht), pointer<bf16>(o));
}

void bf16_backward(const ops::DeltaRuleSpec& spec, const SeqLayout& seqs, const ops::DeltaRuleInputs& in,
                   const Tensor& d_o, const Tensor& dht, ops::DeltaRuleGrads& grads) {
  const Bf16Plan plan(spec, seqs, in, true);
  bf16path::intra(plan.problem, plan.ws);
  bf16path::state_forward(plan.problem, plan.ws, pointer<const float>(in.h0), nullptr, nullptr);
  const bf16* d_out = pointer<const bf16>(d_o);
  bf16path::state_backward(plan.problem, plan.ws, d_out, pointer<const float>(dht), pointer<float>(grads.dh0));
  bf16path::gradients(plan.problem, plan.ws, d_out,
                      {pointer<bf16>(grads.dq), pointer<bf16>(grads.dk), pointer<bf16>(grads.dv),
                       pointer<bf16>(grads.dbeta), pointer<float>(grads.dg)});
}

}  // namespace linea::cuda::delta

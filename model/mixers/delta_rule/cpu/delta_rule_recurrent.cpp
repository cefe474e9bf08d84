#include "model/mixers/delta_rule/cpu/delta_rule_recurrent.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/chunk/cpu/checkpointed_reverse.h"

namespace linea::cpu {

namespace {

// The operands of one token of one head in the general form.
template <class T>
struct Token {
  std::vector<T> q, k, b, a;  // [K]: query, key, erase gate, decay a = exp(g)
  std::vector<T> v, w;        // [V]: value, write gate
};

template <class T>
Token<T> load_token(const DeltaRuleOperands<T>& in, int64_t t, int64_t h) {
  const int64_t K = in.key_dim, V = in.value_dim;
  Token<T> x{std::vector<T>(K),       std::vector<T>(K), std::vector<T>(K),
             std::vector<T>(K, T(1)), std::vector<T>(V), std::vector<T>(V)};
  for (int64_t d = 0; d < K; ++d) {
    x.q[d] = in.q.at(t, h, d);
    x.k[d] = in.k.at(t, h, d);
    x.b[d] = in.erase.at(t, h, d);
    if (in.log_decay.defined()) x.a[d] = std::exp(in.log_decay.at(t, h, d));
  }
  for (int64_t e = 0; e < V; ++e) {
    x.v[e] = in.v.at(t, h, e);
    x.w[e] = in.write.at(t, h, e);
  }
  return x;
}

// S ← S' = Diag(a) S, and returns u = w⊙v − S'ᵀ(b⊙k).
template <class T>
std::vector<T> decay_and_erase(Block<T>& S, const Token<T>& x) {
  std::vector<T> u(x.v.size());
  for (size_t e = 0; e < u.size(); ++e) u[e] = x.w[e] * x.v[e];
  for (int64_t d = 0; d < S.rows(); ++d) {
    T* s = S.row(d);
    const T erase_key = x.b[d] * x.k[d];
    for (int64_t e = 0; e < S.cols(); ++e) {
      s[e] *= x.a[d];
      u[e] -= s[e] * erase_key;
    }
  }
  return u;
}

// S ← S + k uᵀ
template <class T>
void write(Block<T>& S, const std::vector<T>& k, const std::vector<T>& u) {
  for (int64_t d = 0; d < S.rows(); ++d) {
    T* s = S.row(d);
    for (int64_t e = 0; e < S.cols(); ++e) s[e] += k[d] * u[e];
  }
}

// S_{t−1} → S_t
template <class T>
void step(Block<T>& S, const Token<T>& x) {
  write(S, x.k, decay_and_erase(S, x));
}

// The key the write error reads with: ρ = k (GateKind::beta) or b ⊙ k (erase_write).
template <class T>
T error_key(ops::GateKind gate, const Token<T>& x, int64_t d) {
  return gate == ops::GateKind::beta ? x.k[d] : x.b[d] * x.k[d];
}

// r = τ − S'ᵀρ given S' (delta_rule_operands.h): τ = v (beta) or w ⊙ v (erase_write, where r = u).
template <class T>
void store_write_error(ops::GateKind gate, const Block<T>& Sd, const Token<T>& x, T* r) {
  for (int64_t e = 0; e < Sd.cols(); ++e) r[e] = gate == ops::GateKind::beta ? x.v[e] : x.w[e] * x.v[e];
  for (int64_t d = 0; d < Sd.rows(); ++d) {
    const T* s = Sd.row(d);
    const T key = error_key(gate, x, d);
    for (int64_t e = 0; e < Sd.cols(); ++e) r[e] -= s[e] * key;
  }
}

template <class T>
void forward_head(const DeltaRuleOperands<T>& in, const SeqLayout& seqs, int64_t seq, int64_t h, T* o, T* ht, T* r) {
  const int64_t K = in.key_dim, V = in.value_dim;
  Block<T> S = initial_state(in, seq, h);
  for (int64_t t = seqs.begin(seq); t < seqs.end(seq); ++t) {
    const Token<T> x = load_token(in, t, h);
    const std::vector<T> u = decay_and_erase(S, x);  // S is S' now
    if (r) store_write_error(in.gate, S, x, r + (t * in.heads + h) * V);
    write(S, x.k, u);
    T* out = o + (t * in.heads + h) * V;  // o_t = scale · S_tᵀ q_t
    std::fill_n(out, V, T(0));
    for (int64_t d = 0; d < K; ++d) {
      const T* s = S.row(d);
      for (int64_t e = 0; e < V; ++e) out[e] += in.scale * x.q[d] * s[e];
    }
  }
  if (ht) store_state(S, ht, seq, h, in.heads);
}

// Reverse pass over one token. dS holds ∂L/∂S_t on entry and ∂L/∂S_{t−1} on exit; S_prev = S_{t−1}.
//   S_t = S' + k uᵀ, o = scale·S_tᵀ q   ⇒  dS_t += scale·q doᵀ,  dq = scale·S_t do,
//                                           du = dS_tᵀ k,  dk = dS_t u (write part)
//   u = w⊙v − S'ᵀ(b⊙k)                  ⇒  dw = du⊙v, dv = du⊙w, d(b⊙k) = −S' du,
//                                           dS' = dS_t − (b⊙k) duᵀ
//   r = τ − S'ᵀρ (d_r given)              ⇒  dτ = dr, dρ = −S' dr, dS' −= ρ drᵀ
//   S' = Diag(a) S_{t−1}, a = exp(g)      ⇒  dg_d = Σ_e dS'_de S'_de,  dS_{t−1} = Diag(a) dS'
template <class T>
void backward_token(const DeltaRuleOperands<T>& in, const DeltaRuleGradients<T>& grads, int64_t t, int64_t h,
                    const Block<T>& S_prev, const T* d_o, const T* d_r, Block<T>& dS) {
  const int64_t K = in.key_dim, V = in.value_dim;
  const Token<T> x = load_token(in, t, h);
  Block<T> Sd = S_prev;  // becomes S'
  const std::vector<T> u = decay_and_erase(Sd, x);

  T u_dot_do = 0;
  for (int64_t e = 0; e < V; ++e) u_dot_do += u[e] * d_o[e];
  std::vector<T> du(V, T(0));
  for (int64_t d = 0; d < K; ++d) {
    T* ds = dS.row(d);
    const T* s = Sd.row(d);
    T q_grad = 0, k_grad = 0;
    for (int64_t e = 0; e < V; ++e) {
      q_grad += s[e] * d_o[e];
      ds[e] += in.scale * x.q[d] * d_o[e];
      k_grad += ds[e] * u[e];
      du[e] += ds[e] * x.k[d];
    }
    grads.dq.at(t, h, d) += in.scale * (q_grad + x.k[d] * u_dot_do);
    grads.dk.at(t, h, d) += k_grad;
  }
  for (int64_t d = 0; d < K; ++d) {
    T* ds = dS.row(d);
    const T* s = Sd.row(d);
    const T erase_key = x.b[d] * x.k[d];
    const T read_key = d_r ? error_key(in.gate, x, d) : T(0);
    T erase_key_grad = 0, read_key_grad = 0, g_grad = 0;
    for (int64_t e = 0; e < V; ++e) {
      erase_key_grad -= s[e] * du[e];
      ds[e] -= erase_key * du[e];  // dS'
      if (d_r) {
        read_key_grad -= s[e] * d_r[e];
        ds[e] -= read_key * d_r[e];
      }
      g_grad += ds[e] * s[e];
      ds[e] *= x.a[d];  // dS_{t−1}
    }
    if (in.gate == ops::GateKind::erase_write) erase_key_grad += read_key_grad;  // ρ = b ⊙ k
    grads.derase.at(t, h, d) += erase_key_grad * x.k[d];
    grads.dk.at(t, h, d) += erase_key_grad * x.b[d];
    if (in.gate == ops::GateKind::beta) grads.dk.at(t, h, d) += read_key_grad;  // ρ = k
    if (grads.dlog_decay.defined()) grads.dlog_decay.at(t, h, d) += g_grad;
  }
  for (int64_t e = 0; e < V; ++e) {
    // u (and, for erase_write, r) is w ⊙ v − …; for beta r's target is v itself.
    const T dtarget = d_r && in.gate == ops::GateKind::erase_write ? du[e] + d_r[e] : du[e];
    grads.dwrite.at(t, h, e) += dtarget * x.v[e];
    grads.dv.at(t, h, e) += dtarget * x.w[e];
    if (d_r && in.gate == ops::GateKind::beta) grads.dv.at(t, h, e) += d_r[e];
  }
}

template <class T>
void backward_head(const DeltaRuleOperands<T>& in, const SeqLayout& seqs, int64_t seq, int64_t h, const T* d_o,
                   const T* dht, const T* d_r, const DeltaRuleGradients<T>& grads) {
  const int64_t K = in.key_dim, V = in.value_dim;
  Block<T> dS = load_state(dht, seq, h, in.heads, K, V);
  reverse_by_segments(
      initial_state(in, seq, h), seqs.begin(seq), seqs.end(seq), kRecurrentSegment,
      [&](Block<T>& S, int64_t t) { step(S, load_token(in, t, h)); },
      [&](int64_t t, const Block<T>& S_prev) {
        const int64_t row = (t * in.heads + h) * V;
        backward_token(in, grads, t, h, S_prev, d_o + row, d_r ? d_r + row : nullptr, dS);
      });
  if (grads.dh0) add_state(dS, grads.dh0, seq, h, in.heads);
}

}  // namespace

template <class T>
void delta_rule_recurrent_forward(const DeltaRuleOperands<T>& in, const SeqLayout& seqs, T* o, T* ht, T* r) {
  for_each_sequence_head(in, seqs, [&](int64_t seq, int64_t h) { forward_head(in, seqs, seq, h, o, ht, r); });
}

template <class T>
void delta_rule_recurrent_backward(const DeltaRuleOperands<T>& in, const SeqLayout& seqs, const T* d_o, const T* dht,
                                   const T* d_r, const DeltaRuleGradients<T>& grads) {
  for_each_sequence_head(in, seqs,
                         [&](int64_t seq, int64_t h) { backward_head(in, seqs, seq, h, d_o, dht, d_r, grads); });
}

template void delta_rule_recurrent_forward<float>(const DeltaRuleOperands<float>&, const SeqLayout&, float*, float*,
                                                  float*);
template void delta_rule_recurrent_forward<double>(const DeltaRuleOperands<double>&, const SeqLayout&, double*, double*,
                                                   double*);
template void delta_rule_recurrent_backward<float>(const DeltaRuleOperands<float>&, const SeqLayout&, const float*,
                                                   const float*, const float*, const DeltaRuleGradients<float>&);
template void delta_rule_recurrent_backward<double>(const DeltaRuleOperands<double>&, const SeqLayout&, const double*,
                                                    const double*, const double*, const DeltaRuleGradients<double>&);

}  // namespace linea::cpu

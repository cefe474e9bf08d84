#include "model/mixers/gla/cpu/gla_recurrent.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/chunk/cpu/checkpointed_reverse.h"

namespace linea::cpu {

namespace {

// The operands of one token of one head.
template <class T>
struct Token {
  std::vector<T> q, k, a;  // [K]: query, key, decay a = exp(g)
  std::vector<T> v;        // [V]
};

template <class T>
Token<T> load_token(const GlaOperands<T>& in, int64_t t, int64_t h) {
  const int64_t K = in.key_dim, V = in.value_dim;
  Token<T> x{std::vector<T>(K), std::vector<T>(K), std::vector<T>(K), std::vector<T>(V)};
  for (int64_t d = 0; d < K; ++d) {
    x.q[d] = in.q.at(t, h, d);
    x.k[d] = in.key(t, h, d);
    x.a[d] = std::exp(in.log_decay.at(t, h, d));
  }
  for (int64_t e = 0; e < V; ++e) x.v[e] = in.v.at(t, h, e);
  return x;
}

// S_{t−1} → S_t = Diag(a) S_{t−1} + k vᵀ
template <class T>
void step(Block<T>& S, const Token<T>& x) {
  for (int64_t d = 0; d < S.rows(); ++d) {
    T* s = S.row(d);
    for (int64_t e = 0; e < S.cols(); ++e) s[e] = x.a[d] * s[e] + x.k[d] * x.v[e];
  }
}

// out = scale · Sᵀ q
template <class T>
void read(const Block<T>& S, const std::vector<T>& q, T scale, T* out) {
  std::fill_n(out, S.cols(), T(0));
  for (int64_t d = 0; d < S.rows(); ++d) {
    const T* s = S.row(d);
    for (int64_t e = 0; e < S.cols(); ++e) out[e] += scale * q[d] * s[e];
  }
}

// The bonus weight q · (u ⊙ k) of head h.
template <class T>
T bonus_weight(const GlaOperands<T>& in, const Token<T>& x, int64_t h) {
  T b = 0;
  for (int64_t d = 0; d < in.key_dim; ++d) b += x.q[d] * in.u[h * in.key_dim + d] * x.k[d];
  return b;
}

template <class T>
void forward_head(const GlaOperands<T>& in, const SeqLayout& seqs, int64_t seq, int64_t h, T* o, T* ht) {
  const int64_t V = in.value_dim;
  Block<T> S = initial_state(in, seq, h);
  for (int64_t t = seqs.begin(seq); t < seqs.end(seq); ++t) {
    const Token<T> x = load_token(in, t, h);
    T* out = o + (t * in.heads + h) * V;
    if (in.bonus()) {  // o_t = scale · (S_{t−1}ᵀ q + (q · (u ⊙ k)) v)
      read(S, x.q, in.scale, out);
      const T b = in.scale * bonus_weight(in, x, h);
      for (int64_t e = 0; e < V; ++e) out[e] += b * x.v[e];
      step(S, x);
    } else {  // o_t = scale · S_tᵀ q
      step(S, x);
      read(S, x.q, in.scale, out);
    }
  }
  if (ht) store_state(S, ht, seq, h, in.heads);
}

// Reverse pass over one token. dS holds ∂L/∂S_t on entry and ∂L/∂S_{t−1} on exit; S_prev = S_{t−1}.
//   readout o = scale·Sᵀq (S = S_t, or S_{t−1} for the bonus readout)
//                                 ⇒  dS += scale·q doᵀ,  dq = scale·S do
//   bonus  o += scale·(q·(u⊙k)) v  ⇒  with c = scale·(v·do): dq += c u⊙k, dk += c u⊙q, du += c q⊙k,
//                                     dv += scale·(q·(u⊙k)) do
//   S_t = Diag(a) S_{t−1} + k vᵀ   ⇒  dk = dS_t v, dv = dS_tᵀ k, dg_d = a_d Σ_e dS_t,de S_{t−1},de,
//                                     dS_{t−1} = Diag(a) dS_t
//   tied key k = 1 − exp(g)        ⇒  dg −= a ⊙ dk
template <class T>
void backward_token(const GlaOperands<T>& in, const GlaGradients<T>& grads, int64_t t, int64_t h,
                    const Block<T>& S_prev, const T* d_o, Block<T>& dS, T* du) {
  const int64_t K = in.key_dim, V = in.value_dim;
  const Token<T> x = load_token(in, t, h);
  std::vector<T> dq(K, T(0)), dk(K, T(0)), dg(K, T(0)), dv(V, T(0));

  // The readout of S_t (after_write), before the state step's backward.
  if (!in.bonus()) {
    Block<T> S = S_prev;
    step(S, x);
    for (int64_t d = 0; d < K; ++d) {
      T* ds = dS.row(d);
      const T* s = S.row(d);
      for (int64_t e = 0; e < V; ++e) {
        dq[d] += in.scale * s[e] * d_o[e];
        ds[e] += in.scale * x.q[d] * d_o[e];
      }
    }
  }
  // S_t = Diag(a) S_{t−1} + k vᵀ
  for (int64_t d = 0; d < K; ++d) {
    T* ds = dS.row(d);
    const T* s = S_prev.row(d);
    T state_dot = 0;
    for (int64_t e = 0; e < V; ++e) {
      dk[d] += ds[e] * x.v[e];
      dv[e] += ds[e] * x.k[d];
      state_dot += ds[e] * s[e];
      ds[e] *= x.a[d];
    }
    dg[d] += x.a[d] * state_dot;
  }
  // The readout of S_{t−1} and the bonus (before_write_bonus).
  if (in.bonus()) {
    const T* u = in.u + h * K;
    T v_dot_do = 0;
    for (int64_t e = 0; e < V; ++e) v_dot_do += x.v[e] * d_o[e];
    const T c = in.scale * v_dot_do, b = in.scale * bonus_weight(in, x, h);
    for (int64_t d = 0; d < K; ++d) {
      T* ds = dS.row(d);
      const T* s = S_prev.row(d);
      for (int64_t e = 0; e < V; ++e) {
        dq[d] += in.scale * s[e] * d_o[e];
        ds[e] += in.scale * x.q[d] * d_o[e];
      }
      dq[d] += c * u[d] * x.k[d];
      dk[d] += c * u[d] * x.q[d];
      du[d] += c * x.q[d] * x.k[d];
    }
    for (int64_t e = 0; e < V; ++e) dv[e] += b * d_o[e];
  }

  for (int64_t d = 0; d < K; ++d) {
    grads.dq.at(t, h, d) += dq[d];
    if (in.tied_key()) {
      dg[d] -= x.a[d] * dk[d];
    } else {
      grads.dk.at(t, h, d) += dk[d];
    }
    if (grads.dlog_decay.defined()) grads.dlog_decay.at(t, h, d) += dg[d];
  }
  for (int64_t e = 0; e < V; ++e) grads.dv.at(t, h, e) += dv[e];
}

template <class T>
void backward_head(const GlaOperands<T>& in, const SeqLayout& seqs, int64_t seq, int64_t h, const T* d_o, const T* dht,
                   const GlaGradients<T>& grads) {
  const int64_t K = in.key_dim, V = in.value_dim;
  std::vector<T> du(in.bonus() ? K : 0, T(0));
  Block<T> dS = load_state(dht, seq, h, in.heads, K, V);
  reverse_by_segments(
      initial_state(in, seq, h), seqs.begin(seq), seqs.end(seq), kGlaRecurrentSegment,
      [&](Block<T>& S, int64_t t) { step(S, load_token(in, t, h)); },
      [&](int64_t t, const Block<T>& S_prev) {
        backward_token(in, grads, t, h, S_prev, d_o + (t * in.heads + h) * V, dS, du.data());
      });
  if (grads.du_parts) std::copy(du.begin(), du.end(), grads.du_parts + (seq * in.heads + h) * K);
  if (grads.dh0) add_state(dS, grads.dh0, seq, h, in.heads);
}

}  // namespace

template <class T>
void gla_recurrent_forward(const GlaOperands<T>& in, const SeqLayout& seqs, T* o, T* ht) {
  for_each_sequence_head(in, seqs, [&](int64_t seq, int64_t h) { forward_head(in, seqs, seq, h, o, ht); });
}

template <class T>
void gla_recurrent_backward(const GlaOperands<T>& in, const SeqLayout& seqs, const T* d_o, const T* dht,
                            const GlaGradients<T>& grads) {
  for_each_sequence_head(in, seqs, [&](int64_t seq, int64_t h) { backward_head(in, seqs, seq, h, d_o, dht, grads); });
}

template void gla_recurrent_forward<float>(const GlaOperands<float>&, const SeqLayout&, float*, float*);
template void gla_recurrent_forward<double>(const GlaOperands<double>&, const SeqLayout&, double*, double*);
template void gla_recurrent_backward<float>(const GlaOperands<float>&, const SeqLayout&, const float*, const float*,
                                            const GlaGradients<float>&);
template void gla_recurrent_backward<double>(const GlaOperands<double>&, const SeqLayout&, const double*, const double*,
                                             const GlaGradients<double>&);

}  // namespace linea::cpu

#include "model/mixers/delta_rule/cpu/delta_rule_chunked.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "kernels/chunk/cpu/block_products.h"
#include "kernels/chunk/cpu/chunk_state.h"
#include "kernels/chunk/cpu/decayed_gram.h"
#include "kernels/cpu/vector_math.h"

namespace linea::cpu {

namespace {

// T = (I + A)^{-1} for a strictly lower triangular A, by forward substitution on T = I − A T, row
// by row: T_i = e_i − Σ_{m < i} A_im T_m (rows m < i are final, and T_mj = 0 for j > m).
template <class T>
Block<T> unit_lower_inverse(const Block<T>& A) {
  const int64_t L = A.rows();
  Block<T> Tm(L, L);
  for (int64_t i = 0; i < L; ++i) {
    T* t_i = Tm.row(i);
    for (int64_t m = 0; m < i; ++m) {
      const T a = A(i, m);
      const T* t_m = Tm.row(m);
#pragma omp simd
      for (int64_t j = 0; j <= m; ++j) t_i[j] -= a * t_m[j];
    }
    t_i[i] = 1;
  }
  return Tm;
}

// Everything about one chunk of one head that does not depend on the state entering it.
template <class T, bool kPerChannel>
struct Chunk {
  Chunk(const DeltaRuleOperands<T>& in, int64_t first_token, int64_t len, int64_t head)
      : first(first_token),
        q(gather<T>(in.q, first, len, head, in.key_dim)),
        k(gather<T>(in.k, first, len, head, in.key_dim)),
        v(gather<T>(in.v, first, len, head, in.value_dim)),
        b(gather<T>(in.erase, first, len, head, in.key_dim)),
        w(gather<T>(in.write, first, len, head, in.value_dim)),
        decay(in.log_decay, first, len, head, in.key_dim),
        erase_key(hadamard(b, k)),
        A(decayed_gram(erase_key, k, decay, Causal::strict)),
        P(decayed_gram(q, k, decay, Causal::inclusive)),
        Tinv(unit_lower_inverse(A)),
        X(hadamard(w, v)),
        Y(hadamard(erase_key, decay.gamma)),
        U(len, in.value_dim),
        W(len, in.key_dim) {
    add_ab(U, Tinv, X);
    add_ab(W, Tinv, Y);
  }
  int64_t len() const { return q.rows(); }

  int64_t first;
  Block<T> q, k, v, b, w;  // gathered operands: [L,K], [L,K], [L,V], [L,K], [L,V]
  ChunkDecay<T, kPerChannel> decay;
  Block<T> erase_key;  // b ⊙ k
  Block<T> A;          // Σ_d b_id k_id k_jd e_ijd, j < i
  Block<T> P;          // Σ_d q_id k_jd e_ijd, j ≤ i
  Block<T> Tinv;       // (I + A)^{-1}
  Block<T> X, Y;       // w ⊙ v and b ⊙ k ⊙ γ
  Block<T> U, W;       // T X and T Y
};

// Ũ = U − W S0: the vectors u_t the chunk writes, given the state S0 entering it.
template <class T, bool kPerChannel>
Block<T> written(const Chunk<T, kPerChannel>& c, const Block<T>& S0) {
  Block<T> Ut = c.U;
  add_ab(Ut, c.W, S0, T(-1));
  return Ut;
}

// O = scale · [(Q ⊙ γ) S0 + P Ũ]
template <class T, bool kPerChannel>
Block<T> chunk_output(const Chunk<T, kPerChannel>& c, const Block<T>& S0, const Block<T>& Ut, T scale) {
  Block<T> O(c.len(), S0.cols());
  add_ab(O, hadamard(c.q, c.decay.gamma), S0, scale);
  add_ab(O, c.P, Ut, scale);
  return O;
}

// The write error (reference/mixers.md §5.1): erase_write: R = Ũ (its u is the error itself);
// beta: R = V − (K ⊙ γ) S0 − gram(K, K, j < i) Ũ, the un-β-scaled prediction of each token from
// the state before it.
template <class T, bool kPerChannel>
Block<T> write_error(ops::GateKind gate, const Chunk<T, kPerChannel>& c, const Block<T>& S0, const Block<T>& Ut) {
  if (gate == ops::GateKind::erase_write) return Ut;
  Block<T> R = c.v;
  add_ab(R, hadamard(c.k, c.decay.gamma), S0, T(-1));
  add_ab(R, decayed_gram(c.k, c.k, c.decay, Causal::strict), Ut, T(-1));
  return R;
}

// S ← Diag(γ_L) S + (K ⊙ exp(G_L − G))ᵀ Ũ
template <class T, bool kPerChannel>
void advance_state(Block<T>& S, const Chunk<T, kPerChannel>& c, const Block<T>& Ut) {
  advance_chunk_state(S, c.k, c.decay, Ut);
}

template <class T, bool kPerChannel>
void forward_head(const DeltaRuleOperands<T>& in, const SeqLayout& seqs, int64_t seq, int64_t h, T* o, T* ht, T* r) {
  const auto out = Rows<T>::dense(o, in.heads, in.value_dim);
  const auto error = Rows<T>::dense(r, in.heads, in.value_dim);
  Block<T> S = initial_state(in, seq, h);
  for (int64_t first = seqs.begin(seq); first < seqs.end(seq); first += kDeltaRuleChunk) {
    const Chunk<T, kPerChannel> c(in, first, std::min(kDeltaRuleChunk, seqs.end(seq) - first), h);
    const Block<T> Ut = written(c, S);
    store(out, first, h, chunk_output(c, S, Ut, in.scale));
    if (r) store(error, first, h, write_error(in.gate, c, S, Ut));
    advance_state(S, c, Ut);
  }
  if (ht) store_state(S, ht, seq, h, in.heads);
}

// Backward through one chunk. dS holds ∂L/∂S_end on entry and ∂L/∂S0 on exit; S0 is the state
// entering the chunk and dO = ∂L/∂O. Gradients of the chunk's tokens are added to `grads`.
// Each block below differentiates one line of the forward pass (Chunk, written, chunk_output,
// advance_state), from the last to the first; ∂G collects the gradient of the cumulative decay.
template <class T, bool kPerChannel>
void backward_chunk(const DeltaRuleOperands<T>& in, const Chunk<T, kPerChannel>& c, const Block<T>& S0,
                    const Block<T>& dO, const Block<T>* dR, int64_t head, Block<T>& dS,
                    const DeltaRuleGradients<T>& grads) {
  const int64_t L = c.len(), K = in.key_dim, V = in.value_dim;
  const T scale = in.scale;
  const Block<T>& gamma = c.decay.gamma;
  const Block<T> Ut = written(c, S0);
  const Block<T> q_decayed = hadamard(c.q, gamma);  // Q ⊙ γ
  Block<T> dq(L, K), dk(L, K), dv(L, V), db(L, K), dw(L, V), dG(L, K), dUt(L, V), dS0(K, V);

  // O = scale · [(Q ⊙ γ) S0 + P Ũ]
  Block<T> dP(L, L), dq_decayed(L, K);
  add_abt(dP, dO, Ut, scale);
  add_atb(dUt, c.P, dO, scale);
  add_abt(dq_decayed, dO, S0, scale);
  add_atb(dS0, q_decayed, dO, scale);
  add_hadamard(dq, dq_decayed, gamma);
  add_hadamard(dG, dq_decayed, q_decayed);

  // R = Ũ (erase_write), or R = V − (K ⊙ γ) S0 − M Ũ with M = gram(K, K, j < i) (beta)
  if (dR && in.gate == ops::GateKind::erase_write) add_scaled(dUt, *dR);
  if (dR && in.gate == ops::GateKind::beta) {
    const Block<T> k_decayed = hadamard(c.k, gamma);
    const Block<T> M = decayed_gram(c.k, c.k, c.decay, Causal::strict);
    Block<T> dk_decayed(L, K), dM(L, L);
    add_scaled(dv, *dR);
    add_abt(dk_decayed, *dR, S0, T(-1));
    add_atb(dS0, k_decayed, *dR, T(-1));
    add_abt(dM, *dR, Ut, T(-1));
    add_atb(dUt, M, *dR, T(-1));
    add_hadamard(dk, dk_decayed, gamma);
    add_hadamard(dG, dk_decayed, k_decayed);
    decayed_gram_backward(dM, c.k, c.k, c.decay, Causal::strict, dk, dk, dG);
  }

  // S_end = Diag(γ_L) S0 + (K ⊙ exp(G_L − G))ᵀ Ũ
  advance_chunk_state_backward(dS, S0, c.k, c.decay, Ut, dUt, dk, dG, dS0);

  // Ũ = U − W S0
  Block<T> dW(L, K);
  add_atb(dS0, c.W, dUt, T(-1));
  add_abt(dW, dUt, S0, T(-1));

  // U = T X, W = T Y, T = (I + A)^{-1}: dX = Tᵀ dU, dY = Tᵀ dW, and since dT = dU Xᵀ + dW Yᵀ,
  // dA = −Tᵀ dT Tᵀ = −(dX Uᵀ + dY Wᵀ) (read below only at j < i).
  Block<T> dX(L, V), dY(L, K), dA(L, L);
  add_atb(dX, c.Tinv, dUt);
  add_atb(dY, c.Tinv, dW);
  add_abt(dA, dX, c.U, T(-1));
  add_abt(dA, dY, c.W, T(-1));

  // X = w ⊙ v, Y = b ⊙ k ⊙ γ
  add_hadamard(dw, dX, c.v);
  add_hadamard(dv, dX, c.w);
  const Block<T> dY_decayed = hadamard(dY, gamma);
  add_hadamard(db, dY_decayed, c.k);
  add_hadamard(dk, dY_decayed, c.b);
  add_hadamard(dG, dY, c.Y);

  // A = gram(b ⊙ k, k, j < i), P = gram(q, k, j ≤ i)
  Block<T> d_erase_key(L, K);
  decayed_gram_backward(dA, c.erase_key, c.k, c.decay, Causal::strict, d_erase_key, dk, dG);
  add_hadamard(db, d_erase_key, c.k);
  add_hadamard(dk, d_erase_key, c.b);
  decayed_gram_backward(dP, c.q, c.k, c.decay, Causal::inclusive, dq, dk, dG);

  // G_t = Σ_{s≤t} g_s  ⇒  dg_t = Σ_{s≥t} dG_s
  for (int64_t t = L - 2; t >= 0; --t) {
    for (int64_t d = 0; d < K; ++d) dG(t, d) += dG(t + 1, d);
  }

  scatter_add(grads.dq, c.first, head, dq);
  scatter_add(grads.dk, c.first, head, dk);
  scatter_add(grads.dv, c.first, head, dv);
  scatter_add(grads.derase, c.first, head, db);
  scatter_add(grads.dwrite, c.first, head, dw);
  if (grads.dlog_decay.defined()) scatter_add(grads.dlog_decay, c.first, head, dG);
  dS = std::move(dS0);
}

// Recomputes the state entering every chunk with a forward pass, then walks the chunks in reverse.
template <class T, bool kPerChannel>
void backward_head(const DeltaRuleOperands<T>& in, const SeqLayout& seqs, int64_t seq, int64_t h, const T* d_o,
                   const T* dht, const T* d_r, const DeltaRuleGradients<T>& grads) {
  const int64_t K = in.key_dim, V = in.value_dim, begin = seqs.begin(seq), end = seqs.end(seq);
  const auto chunk_len = [&](int64_t first) { return std::min(kDeltaRuleChunk, end - first); };
  std::vector<Block<T>> chunk_start;
  Block<T> S = initial_state(in, seq, h);
  for (int64_t first = begin; first < end; first += kDeltaRuleChunk) {
    chunk_start.push_back(S);
    const Chunk<T, kPerChannel> c(in, first, chunk_len(first), h);
    advance_state(S, c, written(c, S));
  }

  const auto d_out = Rows<const T>::dense(d_o, in.heads, V);
  const auto d_error = Rows<const T>::dense(d_r, in.heads, V);
  Block<T> dS = load_state(dht, seq, h, in.heads, K, V);
  for (int64_t n = static_cast<int64_t>(chunk_start.size()) - 1; n >= 0; --n) {
    const int64_t first = begin + n * kDeltaRuleChunk;
    const Chunk<T, kPerChannel> c(in, first, chunk_len(first), h);
    const std::optional<Block<T>> dR =
        d_r ? std::optional<Block<T>>(gather<T>(d_error, first, c.len(), h, V)) : std::nullopt;
    backward_chunk(in, c, chunk_start[static_cast<size_t>(n)], gather<T>(d_out, first, c.len(), h, V),
                   dR ? &*dR : nullptr, h, dS, grads);
  }
  if (grads.dh0) add_state(dS, grads.dh0, seq, h, in.heads);
}

}  // namespace

template <class T>
void delta_rule_chunked_forward(const DeltaRuleOperands<T>& in, const SeqLayout& seqs, T* o, T* ht, T* r) {
  const bool per_channel = in.decay == ops::DecayKind::channel;
  for_each_sequence_head(in, seqs, [&](int64_t seq, int64_t h) {
    if (per_channel) {
      forward_head<T, true>(in, seqs, seq, h, o, ht, r);
    } else {
      forward_head<T, false>(in, seqs, seq, h, o, ht, r);
    }
  });
}

template <class T>
void delta_rule_chunked_backward(const DeltaRuleOperands<T>& in, const SeqLayout& seqs, const T* d_o, const T* dht,
                                 const T* d_r, const DeltaRuleGradients<T>& grads) {
  const bool per_channel = in.decay == ops::DecayKind::channel;
  for_each_sequence_head(in, seqs, [&](int64_t seq, int64_t h) {
    if (per_channel) {
      backward_head<T, true>(in, seqs, seq, h, d_o, dht, d_r, grads);
    } else {
      backward_head<T, false>(in, seqs, seq, h, d_o, dht, d_r, grads);
    }
  });
}

template void delta_rule_chunked_forward<float>(const DeltaRuleOperands<float>&, const SeqLayout&, float*, float*,
                                                float*);
template void delta_rule_chunked_forward<double>(const DeltaRuleOperands<double>&, const SeqLayout&, double*, double*,
                                                 double*);
template void delta_rule_chunked_backward<float>(const DeltaRuleOperands<float>&, const SeqLayout&, const float*,
                                                 const float*, const float*, const DeltaRuleGradients<float>&);
template void delta_rule_chunked_backward<double>(const DeltaRuleOperands<double>&, const SeqLayout&, const double*,
                                                  const double*, const double*, const DeltaRuleGradients<double>&);

}  // namespace linea::cpu

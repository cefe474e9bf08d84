#include "model/mixers/gla/cpu/gla_chunked.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/chunk/cpu/block_products.h"
#include "kernels/chunk/cpu/chunk_state.h"
#include "kernels/chunk/cpu/decayed_gram.h"

namespace linea::cpu {

namespace {

// The keys of tokens [first, first + len) of `head`: given, or 1 − exp(g) when tied to the decay.
template <class T>
Block<T> gather_keys(const GlaOperands<T>& in, int64_t first, int64_t len, int64_t head) {
  if (!in.tied_key()) return gather<T>(in.k, first, len, head, in.key_dim);
  Block<T> k(len, in.key_dim);
  for (int64_t t = 0; t < len; ++t) {
    for (int64_t d = 0; d < in.key_dim; ++d) k(t, d) = in.key(first + t, head, d);
  }
  return k;
}

// Everything about one chunk of one head that does not depend on the state entering it.
template <class T, bool kPerChannel>
struct Chunk {
  Chunk(const GlaOperands<T>& in, int64_t first_token, int64_t len, int64_t head)
      : first(first_token),
        q(gather<T>(in.q, first, len, head, in.key_dim)),
        k(gather_keys(in, first, len, head)),
        v(gather<T>(in.v, first, len, head, in.value_dim)),
        decay(in.log_decay, first, len, head, in.key_dim, in.bonus() ? 1 : 0),
        P(decayed_gram(q, k, decay, Causal::inclusive)) {
    if (in.bonus()) {  // P_ii = Σ_d q_id u_d k_id
      const T* u = in.u + head * in.key_dim;
      for (int64_t i = 0; i < len; ++i) {
        T b = 0;
        for (int64_t d = 0; d < in.key_dim; ++d) b += q(i, d) * u[d] * k(i, d);
        P(i, i) = b;
      }
    }
  }
  int64_t len() const { return q.rows(); }

  int64_t first;
  Block<T> q, k, v;  // gathered operands: [L,K], [L,K], [L,V]
  ChunkDecay<T, kPerChannel> decay;
  Block<T> P;  // the decayed causal Gram of q and k (with the bonus on the diagonal)
};

// O = scale · [(Q ⊙ exp(R)) S0 + P V]
template <class T, bool kPerChannel>
Block<T> chunk_output(const Chunk<T, kPerChannel>& c, const Block<T>& S0, T scale) {
  Block<T> O(c.len(), S0.cols());
  add_ab(O, hadamard(c.q, c.decay.row_gamma), S0, scale);
  add_ab(O, c.P, c.v, scale);
  return O;
}

// S ← Diag(γ_L) S + (K ⊙ exp(G_L − G))ᵀ V
template <class T, bool kPerChannel>
void advance_state(Block<T>& S, const Chunk<T, kPerChannel>& c) {
  advance_chunk_state(S, c.k, c.decay, c.v);
}

template <class T, bool kPerChannel>
void forward_head(const GlaOperands<T>& in, const SeqLayout& seqs, int64_t seq, int64_t h, T* o, T* ht) {
  const auto out = Rows<T>::dense(o, in.heads, in.value_dim);
  Block<T> S = initial_state(in, seq, h);
  for (int64_t first = seqs.begin(seq); first < seqs.end(seq); first += kGlaChunk) {
    const Chunk<T, kPerChannel> c(in, first, std::min(kGlaChunk, seqs.end(seq) - first), h);
    store(out, first, h, chunk_output(c, S, in.scale));
    advance_state(S, c);
  }
  if (ht) store_state(S, ht, seq, h, in.heads);
}

// Backward through one chunk. dS holds ∂L/∂S_end on entry and ∂L/∂S0 on exit; S0 is the state
// entering the chunk and dO = ∂L/∂O. Gradients of the chunk's tokens are added to `grads`, the bonus
// gradient to du ([K]). Each block below differentiates one line of the forward pass (Chunk,
// chunk_output, advance_state), from the last to the first; dG collects the gradient of the
// cumulative decay G.
template <class T, bool kPerChannel>
void backward_chunk(const GlaOperands<T>& in, const Chunk<T, kPerChannel>& c, const Block<T>& S0, const Block<T>& dO,
                    int64_t head, Block<T>& dS, const GlaGradients<T>& grads, T* du) {
  const int64_t L = c.len(), K = in.key_dim, V = in.value_dim, shift = c.decay.row_shift();
  const T scale = in.scale;
  const Block<T> q_decayed = hadamard(c.q, c.decay.row_gamma);  // Q ⊙ exp(R)
  Block<T> dq(L, K), dk(L, K), dv(L, V), dG(L, K), dS0(K, V);

  // O = scale · [(Q ⊙ exp(R)) S0 + P V]
  Block<T> dP(L, L), dq_decayed(L, K);
  add_abt(dP, dO, c.v, scale);
  add_atb(dv, c.P, dO, scale);
  add_abt(dq_decayed, dO, S0, scale);
  add_atb(dS0, q_decayed, dO, scale);
  add_hadamard(dq, dq_decayed, c.decay.row_gamma);
  for (int64_t t = shift; t < L; ++t) {  // R_t = G_{t − shift}; R_0 = 0 under a shift
    for (int64_t d = 0; d < K; ++d) dG(t - shift, d) += dq_decayed(t, d) * q_decayed(t, d);
  }

  // S_end = Diag(γ_L) S0 + (K ⊙ exp(G_L − G))ᵀ V
  advance_chunk_state_backward(dS, S0, c.k, c.decay, c.v, dv, dk, dG, dS0);

  // P = gram(q, k) + Diag(q · (u ⊙ k))
  decayed_gram_backward(dP, c.q, c.k, c.decay, Causal::inclusive, dq, dk, dG);
  if (in.bonus()) {
    const T* u = in.u + head * K;
    for (int64_t i = 0; i < L; ++i) {
      for (int64_t d = 0; d < K; ++d) {
        dq(i, d) += dP(i, i) * u[d] * c.k(i, d);
        dk(i, d) += dP(i, i) * u[d] * c.q(i, d);
        du[d] += dP(i, i) * c.q(i, d) * c.k(i, d);
      }
    }
  }

  // G_t = Σ_{s≤t} g_s  ⇒  dg_t = Σ_{s≥t} dG_s; a tied key k = 1 − exp(g) adds −exp(g) ⊙ dk.
  for (int64_t t = L - 2; t >= 0; --t) {
    for (int64_t d = 0; d < K; ++d) dG(t, d) += dG(t + 1, d);
  }
  if (in.tied_key()) {
    for (int64_t t = 0; t < L; ++t) {
      for (int64_t d = 0; d < K; ++d) dG(t, d) -= std::exp(in.log_decay.at(c.first + t, head, d)) * dk(t, d);
    }
  } else {
    scatter_add(grads.dk, c.first, head, dk);
  }
  scatter_add(grads.dq, c.first, head, dq);
  scatter_add(grads.dv, c.first, head, dv);
  if (grads.dlog_decay.defined()) scatter_add(grads.dlog_decay, c.first, head, dG);
  dS = std::move(dS0);
}

// Recomputes the state entering every chunk with a forward pass, then walks the chunks in reverse.
template <class T, bool kPerChannel>
void backward_head(const GlaOperands<T>& in, const SeqLayout& seqs, int64_t seq, int64_t h, const T* d_o, const T* dht,
                   const GlaGradients<T>& grads) {
  const int64_t K = in.key_dim, V = in.value_dim, begin = seqs.begin(seq), end = seqs.end(seq);
  const auto chunk_len = [&](int64_t first) { return std::min(kGlaChunk, end - first); };
  std::vector<Block<T>> chunk_start;
  Block<T> S = initial_state(in, seq, h);
  for (int64_t first = begin; first < end; first += kGlaChunk) {
    chunk_start.push_back(S);
    advance_state(S, Chunk<T, kPerChannel>(in, first, chunk_len(first), h));
  }

  const auto d_out = Rows<const T>::dense(d_o, in.heads, V);
  std::vector<T> du(in.bonus() ? K : 0, T(0));
  Block<T> dS = load_state(dht, seq, h, in.heads, K, V);
  for (int64_t n = static_cast<int64_t>(chunk_start.size()) - 1; n >= 0; --n) {
    const int64_t first = begin + n * kGlaChunk;
    const Chunk<T, kPerChannel> c(in, first, chunk_len(first), h);
    backward_chunk(in, c, chunk_start[static_cast<size_t>(n)], gather<T>(d_out, first, c.len(), h, V), h, dS, grads,
                   du.data());
  }
  if (grads.du_parts) std::copy(du.begin(), du.end(), grads.du_parts + (seq * in.heads + h) * K);
  if (grads.dh0) add_state(dS, grads.dh0, seq, h, in.heads);
}

}  // namespace

template <class T>
void gla_chunked_forward(const GlaOperands<T>& in, const SeqLayout& seqs, T* o, T* ht) {
  const bool per_channel = in.spec.decay == ops::GlaDecay::channel;
  for_each_sequence_head(in, seqs, [&](int64_t seq, int64_t h) {
    if (per_channel) {
      forward_head<T, true>(in, seqs, seq, h, o, ht);
    } else {
      forward_head<T, false>(in, seqs, seq, h, o, ht);
    }
  });
}

template <class T>
void gla_chunked_backward(const GlaOperands<T>& in, const SeqLayout& seqs, const T* d_o, const T* dht,
                          const GlaGradients<T>& grads) {
  const bool per_channel = in.spec.decay == ops::GlaDecay::channel;
  for_each_sequence_head(in, seqs, [&](int64_t seq, int64_t h) {
    if (per_channel) {
      backward_head<T, true>(in, seqs, seq, h, d_o, dht, grads);
    } else {
      backward_head<T, false>(in, seqs, seq, h, d_o, dht, grads);
    }
  });
}

template void gla_chunked_forward<float>(const GlaOperands<float>&, const SeqLayout&, float*, float*);
template void gla_chunked_forward<double>(const GlaOperands<double>&, const SeqLayout&, double*, double*);
template void gla_chunked_backward<float>(const GlaOperands<float>&, const SeqLayout&, const float*, const float*,
                                          const GlaGradients<float>&);
template void gla_chunked_backward<double>(const GlaOperands<double>&, const SeqLayout&, const double*, const double*,
                                           const GlaGradients<double>&);

}  // namespace linea::cpu

#include "model/mixers/delta_rule/cpu/delta_rule_chunked.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vector_math.h"

namespace linea::cpu {

namespace {

// ---- dense products on Blocks ------------------------------------------------------------------
// Through OpenBLAS (kernels/cpu/gemm.h): blocks have at most 64 rows and K or V columns, and inside
// the OpenMP loop over (sequence, head) OpenBLAS runs on the calling thread.

// C += α · op(A) op(B), op(X) = X or Xᵀ
template <class T>
void add_product(Block<T>& C, bool transpose_a, const Block<T>& A, bool transpose_b, const Block<T>& B, T alpha) {
  const int64_t m = transpose_a ? A.cols() : A.rows(), k = transpose_a ? A.rows() : A.cols();
  const int64_t n = transpose_b ? B.rows() : B.cols();
  gemm<T>(transpose_a, transpose_b, m, n, k, alpha, A.data(), A.cols(), B.data(), B.cols(), T(1), C.data(), C.cols());
}

// C += α · A B
template <class T>
void add_ab(Block<T>& C, const Block<T>& A, const Block<T>& B, T alpha = 1) {
  add_product(C, false, A, false, B, alpha);
}

// C += α · Aᵀ B
template <class T>
void add_atb(Block<T>& C, const Block<T>& A, const Block<T>& B, T alpha = 1) {
  add_product(C, true, A, false, B, alpha);
}

// C += α · A Bᵀ
template <class T>
void add_abt(Block<T>& C, const Block<T>& A, const Block<T>& B, T alpha = 1) {
  add_product(C, false, A, true, B, alpha);
}

// A ⊙ B
template <class T>
Block<T> hadamard(const Block<T>& A, const Block<T>& B) {
  Block<T> C(A.rows(), A.cols());
  for (int64_t i = 0; i < A.rows() * A.cols(); ++i) C.data()[i] = A.data()[i] * B.data()[i];
  return C;
}

// C += α · A ⊙ B
template <class T>
void add_hadamard(Block<T>& C, const Block<T>& A, const Block<T>& B, T alpha = 1) {
  for (int64_t i = 0; i < A.rows() * A.cols(); ++i) C.data()[i] += alpha * A.data()[i] * B.data()[i];
}

// Rows [first, first + count) of X ⊙ F.
template <class T>
Block<T> rows_times(const Block<T>& X, const Block<T>& F, int64_t first, int64_t count) {
  Block<T> C(count, X.cols());
  const T *x = X.row(first), *f = F.row(first);
  for (int64_t i = 0; i < count * X.cols(); ++i) C.data()[i] = x[i] * f[i];
  return C;
}

// ---- the decay of one chunk ---------------------------------------------------------------------
// G_t = Σ_{s≤t} g_s from the chunk start ([L, K]; without decay G = 0), γ = exp(G) and
// to_end = exp(G_L − G). The pair factors exp(G_i − G_j), j ≤ i, go by sub-chunks of kSubChunk
// rows (reference/mixers.md §2.3). With n the first row of i's sub-chunk:
//   j in i's sub-chunk:  pair(i, j) = exp(G_i − G_j), one per pair for a scalar decay (or none),
//                        one per pair and channel for a per-channel decay;
//   j < n:               exp(G_i − G_j) = from_ref_i · to_ref(n)_j with from_ref_i = exp(G_i − G_n)
//                        and to_ref(n)_j = exp(G_n − G_j),
// so that sums over the pairs of different sub-chunks are matmuls of rescaled rows. Every exponent
// is ≤ 0: no factor overflows.
inline constexpr int64_t kSubChunk = 16;

template <class T, bool kPerChannel>
class ChunkDecay {
 public:
  ChunkDecay(const DeltaRuleOperands<T>& in, int64_t first, int64_t len, int64_t head)
      : G(len, in.key_dim),
        gamma(len, in.key_dim),
        to_end(len, in.key_dim),
        from_ref(len, in.key_dim),
        key_dim_(in.key_dim) {
    const int64_t K = in.key_dim;
    if (in.log_decay.defined()) {
      for (int64_t t = 0; t < len; ++t) {
        for (int64_t d = 0; d < K; ++d) G(t, d) = (t > 0 ? G(t - 1, d) : T(0)) + in.log_decay.at(first + t, head, d);
      }
    }
    // row[d] = exp(exponent(d)); for a scalar decay (or none) every channel has channel 0's exponent.
    const auto exp_row = [K](T* row, auto exponent) {
      if constexpr (kPerChannel) {
#pragma omp simd
        for (int64_t d = 0; d < K; ++d) row[d] = std::exp(exponent(d));
      } else {
        std::fill_n(row, K, std::exp(exponent(0)));
      }
    };
    for (int64_t t = 0; t < len; ++t) {
      const T *g = G.row(t), *g_end = G.row(len - 1), *g_ref = G.row(t - t % kSubChunk);
      exp_row(gamma.row(t), [=](int64_t d) { return g[d]; });
      exp_row(to_end.row(t), [=](int64_t d) { return g_end[d] - g[d]; });
      exp_row(from_ref.row(t), [=](int64_t d) { return g[d] - g_ref[d]; });
    }
    for (int64_t n = 0; n < len; n += kSubChunk) {
      Block<T>& f = to_ref_.emplace_back(n, K);
      for (int64_t j = 0; j < n; ++j) {
        const T *g_n = G.row(n), *g_j = G.row(j);
        exp_row(f.row(j), [=](int64_t d) { return g_n[d] - g_j[d]; });
      }
    }
    const int64_t width = kPerChannel ? K : 1;
    pair_.resize(static_cast<size_t>(len * kSubChunk * width));
    for (int64_t i = 0; i < len; ++i) {
      for (int64_t j = i - i % kSubChunk; j <= i; ++j) {
        T* f = pair_.data() + pair_index(i, j) * width;
#pragma omp simd
        for (int64_t d = 0; d < width; ++d) f[d] = std::exp(G(i, d) - G(j, d));
      }
    }
  }
  // exp(G_i − G_j) for j ≤ i in i's sub-chunk: kPerChannel ? K factors : one factor.
  const T* pair(int64_t i, int64_t j) const { return pair_.data() + pair_index(i, j) * (kPerChannel ? key_dim_ : 1); }
  // exp(G_n − G_j) for j < n, n the first row of a sub-chunk: [n, K].
  const Block<T>& to_ref(int64_t n) const { return to_ref_[static_cast<size_t>(n / kSubChunk)]; }

  Block<T> G, gamma, to_end;
  Block<T> from_ref;  // exp(G_i − G_n(i)), n(i) the first row of i's sub-chunk

 private:
  static int64_t pair_index(int64_t i, int64_t j) { return i * kSubChunk + j % kSubChunk; }
  int64_t key_dim_;
  std::vector<Block<T>> to_ref_;
  std::vector<T> pair_;
};

enum class Causal { strict, inclusive };  // pairs j < i, or j ≤ i
int64_t last_pair(int64_t i, Causal mask) { return mask == Causal::strict ? i - 1 : i; }

// M_ij = Σ_d X_id Y_jd exp(G_id − G_jd) for the pairs of `mask`, 0 elsewhere. X, Y: [L, K].
// For the sub-chunk I starting at row n, the pairs with every earlier row are one matmul,
// M_{I,<n} = (X_I ⊙ from_ref_I) (Y_{<n} ⊙ to_ref(n))ᵀ; the pairs inside I go element by element.
template <class T, bool kPerChannel>
Block<T> decayed_gram(const Block<T>& X, const Block<T>& Y, const ChunkDecay<T, kPerChannel>& decay, Causal mask) {
  const int64_t L = X.rows(), K = X.cols();
  Block<T> M(L, L);
  for (int64_t n = 0; n < L; n += kSubChunk) {
    const int64_t rows = std::min(kSubChunk, L - n);
    if (n > 0) {
      const Block<T> x = rows_times(X, decay.from_ref, n, rows), y = rows_times(Y, decay.to_ref(n), 0, n);
      gemm<T>(false, true, rows, n, K, T(1), x.data(), K, y.data(), K, T(0), M.row(n), L);
    }
    for (int64_t i = n; i < n + rows; ++i) {
      const T* x = X.row(i);
      for (int64_t j = n; j <= last_pair(i, mask); ++j) {
        const T* y = Y.row(j);
        const T* f = decay.pair(i, j);
        T s = 0;
        if constexpr (kPerChannel) {
#pragma omp simd reduction(+ : s)
          for (int64_t d = 0; d < K; ++d) s += x[d] * y[d] * f[d];
        } else {
#pragma omp simd reduction(+ : s)
          for (int64_t d = 0; d < K; ++d) s += x[d] * y[d];
          s *= f[0];
        }
        M(i, j) = s;
      }
    }
  }
  return M;
}

// Backward of decayed_gram, reading dM only at the pairs of `mask`. With e_ijd = exp(G_id − G_jd)
// and c_ijd = dM_ij X_id Y_jd e_ijd:
//   dX_id += Σ_j dM_ij Y_jd e_ijd,   dY_jd += Σ_i dM_ij X_id e_ijd,
//   dG_id += Σ_j c_ijd,  dG_jd −= Σ_i c_ijd   (G_i enters e_ij with +, G_j with −).
// Across sub-chunks (j < n ≤ i, x̃ = X_I ⊙ from_ref_I, ỹ = Y_{<n} ⊙ to_ref(n)): dx̃ = dM_{I,<n} ỹ and
// dỹ = dM_{I,<n}ᵀ x̃ are matmuls, dX_I += dx̃ ⊙ from_ref_I, and Σ_j c_ijd = X_id (dx̃ ⊙ from_ref)_id
// (likewise for Y). A diagonal pair (e = 1) adds and removes the same c_iid, so it is skipped in dG:
// exact cancelling terms would only leave rounding residue, which under strong decay can exceed dg
// itself. For a scalar decay dG is summed over channels later.
template <class T, bool kPerChannel>
void decayed_gram_backward(const Block<T>& dM, const Block<T>& X, const Block<T>& Y,
                           const ChunkDecay<T, kPerChannel>& decay, Causal mask, Block<T>& dX, Block<T>& dY,
                           Block<T>& dG) {
  const int64_t L = X.rows(), K = X.cols();
  for (int64_t n = 0; n < L; n += kSubChunk) {
    const int64_t rows = std::min(kSubChunk, L - n);
    if (n > 0) {
      const Block<T>& to_ref = decay.to_ref(n);
      const Block<T> x = rows_times(X, decay.from_ref, n, rows), y = rows_times(Y, to_ref, 0, n);
      Block<T> dx(rows, K), dy(n, K);
      gemm<T>(false, false, rows, K, n, T(1), dM.row(n), L, y.data(), K, T(0), dx.data(), K);
      gemm<T>(true, false, n, K, rows, T(1), dM.row(n), L, x.data(), K, T(0), dy.data(), K);
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t d = 0; d < K; ++d) {
          const T through_pairs = dx(i, d) * decay.from_ref(n + i, d);
          dX(n + i, d) += through_pairs;
          dG(n + i, d) += X(n + i, d) * through_pairs;
        }
      }
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t d = 0; d < K; ++d) {
          const T through_pairs = dy(j, d) * to_ref(j, d);
          dY(j, d) += through_pairs;
          dG(j, d) -= Y(j, d) * through_pairs;
        }
      }
    }
    for (int64_t i = n; i < n + rows; ++i) {
      const T* x = X.row(i);
      T* dx = dX.row(i);
      T* dG_i = dG.row(i);
      for (int64_t j = n; j <= last_pair(i, mask); ++j) {
        const T m = dM(i, j);
        if (m == T(0)) continue;
        const T* y = Y.row(j);
        T* dy = dY.row(j);
        T* dG_j = dG.row(j);
        const T* f = decay.pair(i, j);
        const T through_dG = i == j ? T(0) : T(1);  // a diagonal pair adds exactly 0 to dG
#pragma omp simd
        for (int64_t d = 0; d < K; ++d) {
          const T mf = kPerChannel ? m * f[d] : m * f[0];
          dx[d] += mf * y[d];
          dy[d] += mf * x[d];
          const T c = through_dG * mf * x[d] * y[d];
          dG_i[d] += c;
          dG_j[d] -= c;
        }
      }
    }
  }
}

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
        decay(in, first, len, head),
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

// S ← Diag(γ_L) S + (K ⊙ exp(G_L − G))ᵀ Ũ
template <class T, bool kPerChannel>
void advance_state(Block<T>& S, const Chunk<T, kPerChannel>& c, const Block<T>& Ut) {
  const T* gamma_end = c.decay.gamma.row(c.len() - 1);
  for (int64_t d = 0; d < S.rows(); ++d) {
    T* s = S.row(d);
    for (int64_t e = 0; e < S.cols(); ++e) s[e] *= gamma_end[d];
  }
  add_atb(S, hadamard(c.k, c.decay.to_end), Ut);
}

template <class T, bool kPerChannel>
void forward_head(const DeltaRuleOperands<T>& in, const SeqLayout& seqs, int64_t seq, int64_t h, T* o, T* ht) {
  const auto out = Rows<T>::dense(o, in.heads, in.value_dim);
  Block<T> S = initial_state(in, seq, h);
  for (int64_t first = seqs.begin(seq); first < seqs.end(seq); first += kDeltaRuleChunk) {
    const Chunk<T, kPerChannel> c(in, first, std::min(kDeltaRuleChunk, seqs.end(seq) - first), h);
    const Block<T> Ut = written(c, S);
    store(out, first, h, chunk_output(c, S, Ut, in.scale));
    advance_state(S, c, Ut);
  }
  if (ht) std::copy_n(S.data(), S.rows() * S.cols(), ht + state_offset(seq, h, in.heads, in.key_dim, in.value_dim));
}

// Backward through one chunk. dS holds ∂L/∂S_end on entry and ∂L/∂S0 on exit; S0 is the state
// entering the chunk and dO = ∂L/∂O. Gradients of the chunk's tokens are added to `grads`.
// Each block below differentiates one line of the forward pass (Chunk, written, chunk_output,
// advance_state), from the last to the first; ∂G collects the gradient of the cumulative decay.
template <class T, bool kPerChannel>
void backward_chunk(const DeltaRuleOperands<T>& in, const Chunk<T, kPerChannel>& c, const Block<T>& S0,
                    const Block<T>& dO, int64_t head, Block<T>& dS, const DeltaRuleGradients<T>& grads) {
  const int64_t L = c.len(), K = in.key_dim, V = in.value_dim;
  const T scale = in.scale;
  const Block<T>& gamma = c.decay.gamma;
  const Block<T> Ut = written(c, S0);
  const Block<T> q_decayed = hadamard(c.q, gamma);          // Q ⊙ γ
  const Block<T> k_to_end = hadamard(c.k, c.decay.to_end);  // K ⊙ exp(G_L − G)
  Block<T> dq(L, K), dk(L, K), dv(L, V), db(L, K), dw(L, V), dG(L, K), dUt(L, V), dS0(K, V);

  // O = scale · [(Q ⊙ γ) S0 + P Ũ]
  Block<T> dP(L, L), dq_decayed(L, K);
  add_abt(dP, dO, Ut, scale);
  add_atb(dUt, c.P, dO, scale);
  add_abt(dq_decayed, dO, S0, scale);
  add_atb(dS0, q_decayed, dO, scale);
  add_hadamard(dq, dq_decayed, gamma);
  add_hadamard(dG, dq_decayed, q_decayed);

  // S_end = Diag(γ_L) S0 + (K ⊙ exp(G_L − G))ᵀ Ũ
  Block<T> dk_to_end(L, K);
  add_ab(dUt, k_to_end, dS);
  add_abt(dk_to_end, Ut, dS);
  add_hadamard(dk, dk_to_end, c.decay.to_end);
  // Through exp(G_L − G_t): + at G_L, − at G_t. At t = L the two cancel exactly and are skipped,
  // so that no rounding residue of them reaches dg.
  T* dG_end = dG.row(L - 1);
  for (int64_t t = 0; t + 1 < L; ++t) {
    for (int64_t d = 0; d < K; ++d) {
      const T through_to_end = dk_to_end(t, d) * k_to_end(t, d);
      dG(t, d) -= through_to_end;
      dG_end[d] += through_to_end;
    }
  }
  for (int64_t d = 0; d < K; ++d) {
    const T g_end = gamma(L - 1, d);
    T state_dot = 0;
    for (int64_t e = 0; e < V; ++e) {
      state_dot += S0(d, e) * dS(d, e);
      dS0(d, e) += g_end * dS(d, e);
    }
    dG_end[d] += g_end * state_dot;
  }

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
                   const T* dht, const DeltaRuleGradients<T>& grads) {
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
  Block<T> dS(K, V);
  if (dht) std::copy_n(dht + state_offset(seq, h, in.heads, K, V), K * V, dS.data());
  for (int64_t n = static_cast<int64_t>(chunk_start.size()) - 1; n >= 0; --n) {
    const int64_t first = begin + n * kDeltaRuleChunk;
    const Chunk<T, kPerChannel> c(in, first, chunk_len(first), h);
    backward_chunk(in, c, chunk_start[static_cast<size_t>(n)], gather<T>(d_out, first, c.len(), h, V), h, dS, grads);
  }
  if (grads.dh0) {
    T* dh0 = grads.dh0 + state_offset(seq, h, in.heads, K, V);
    for (int64_t i = 0; i < K * V; ++i) dh0[i] += dS.data()[i];
  }
}

}  // namespace

template <class T>
void delta_rule_chunked_forward(const DeltaRuleOperands<T>& in, const SeqLayout& seqs, T* o, T* ht) {
  const int64_t tasks = seqs.num_seqs() * in.heads;
  const bool per_channel = in.decay == ops::DecayKind::channel;
#pragma omp parallel for schedule(dynamic) if (worth_threads(in, seqs))
  for (int64_t i = 0; i < tasks; ++i) {
    if (per_channel) {
      forward_head<T, true>(in, seqs, i / in.heads, i % in.heads, o, ht);
    } else {
      forward_head<T, false>(in, seqs, i / in.heads, i % in.heads, o, ht);
    }
  }
}

template <class T>
void delta_rule_chunked_backward(const DeltaRuleOperands<T>& in, const SeqLayout& seqs, const T* d_o, const T* dht,
                                 const DeltaRuleGradients<T>& grads) {
  const int64_t tasks = seqs.num_seqs() * in.heads;
  const bool per_channel = in.decay == ops::DecayKind::channel;
#pragma omp parallel for schedule(dynamic) if (worth_threads(in, seqs))
  for (int64_t i = 0; i < tasks; ++i) {
    if (per_channel) {
      backward_head<T, true>(in, seqs, i / in.heads, i % in.heads, d_o, dht, grads);
    } else {
      backward_head<T, false>(in, seqs, i / in.heads, i % in.heads, d_o, dht, grads);
    }
  }
}

template void delta_rule_chunked_forward<float>(const DeltaRuleOperands<float>&, const SeqLayout&, float*, float*);
template void delta_rule_chunked_forward<double>(const DeltaRuleOperands<double>&, const SeqLayout&, double*, double*);
template void delta_rule_chunked_backward<float>(const DeltaRuleOperands<float>&, const SeqLayout&, const float*,
                                                 const float*, const DeltaRuleGradients<float>&);
template void delta_rule_chunked_backward<double>(const DeltaRuleOperands<double>&, const SeqLayout&, const double*,
                                                  const double*, const DeltaRuleGradients<double>&);

}  // namespace linea::cpu

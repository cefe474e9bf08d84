// The decay of one chunk and the decayed Gram matrices of the chunked CPU kernels
// (reference/mixers.md §2.1–§2.3), shared by the delta-rule and gated-linear-attention families.
//
// For a chunk of L tokens, G_t = Σ_{s≤t} g_s is the log decay cumulated from the chunk start
// ([L, K]; without decay G = 0, for a scalar decay every channel holds the same value). A row reads
// the state as it stood `row_shift` tokens earlier: its log decay is R_i = G_{i−row_shift} (0 before
// the chunk start). row_shift is 0 when o_t reads S_t, 1 when it reads S_{t−1} (RWKV-6). Then
//
//   M_ij = Σ_d X_id Y_jd exp(R_id − G_jd)   for the causal pairs j ≤ i − row_shift (inclusive mask)
//                                           or j < i − row_shift (strict mask)
//
// is formed by sub-chunks of kSubChunk rows: with n the first row of i's sub-chunk and c = n − row_shift
// (or 0) the first column that row n reads at a decay of exactly 1,
//   j ≥ c:  element by element, pair(i, j) = exp(R_i − G_j) (one factor per pair for a scalar decay,
//           one per pair and channel for a per-channel decay);
//   j < c:  exp(R_i − G_j) = from_ref_i · to_ref(n)_j with from_ref_i = exp(R_i − R_n) and
//           to_ref(n)_j = exp(R_n − G_j), so that the pairs with earlier columns are one matmul of
//           rescaled rows.
// Every exponent is ≤ 0 (g ≤ 0): no factor overflows. Starting the element-wise columns at c keeps
// every pair of decay 1 (j = i − row_shift) out of the matmul, so that the backward can leave its
// exactly cancelling contributions to dG out (decayed_gram_backward).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/chunk/cpu/block_products.h"
#include "kernels/chunk/cpu/blocks.h"
#include "kernels/cpu/gemm.h"

namespace linea::cpu {

inline constexpr int64_t kSubChunk = 16;

template <class T, bool kPerChannel>
class ChunkDecay {
 public:
  // The decay of tokens [first, first + len) of `head`; log_decay may be undefined (no decay).
  ChunkDecay(const Rows<const T>& log_decay, int64_t first, int64_t len, int64_t head, int64_t key_dim,
             int64_t row_shift = 0)
      : gamma(len, key_dim),
        to_end(len, key_dim),
        row_gamma(len, key_dim),
        from_ref(len, key_dim),
        row_shift_(row_shift),
        key_dim_(key_dim) {
    const int64_t K = key_dim;
    // G and R in f64 whatever T is: in f32 a cumulative sum of strong decays (|G| in the thousands)
    // would leave its differences G_i − G_j, the exponents below, with absolute errors ~1e-4.
    Block<double> G(len, K), R(len, K);  // R_i = G_{i − row_shift}, 0 before the chunk
    if (log_decay.defined()) {
      for (int64_t t = 0; t < len; ++t) {
        for (int64_t d = 0; d < K; ++d) G(t, d) = (t > 0 ? G(t - 1, d) : 0.0) + log_decay.at(first + t, head, d);
      }
    }
    for (int64_t t = row_shift; t < len; ++t) std::copy_n(G.row(t - row_shift), K, R.row(t));
    // row[d] = exp(exponent(d)); for a scalar decay (or none) every channel has channel 0's exponent.
    const auto exp_row = [K](T* row, auto exponent) {
      if constexpr (kPerChannel) {
#pragma omp simd
        for (int64_t d = 0; d < K; ++d) row[d] = static_cast<T>(std::exp(exponent(d)));
      } else {
        std::fill_n(row, K, static_cast<T>(std::exp(exponent(0))));
      }
    };
    for (int64_t t = 0; t < len; ++t) {
      const double *g = G.row(t), *g_end = G.row(len - 1), *r = R.row(t), *r_ref = R.row(t - t % kSubChunk);
      exp_row(gamma.row(t), [=](int64_t d) { return g[d]; });
      exp_row(to_end.row(t), [=](int64_t d) { return g_end[d] - g[d]; });
      exp_row(row_gamma.row(t), [=](int64_t d) { return r[d]; });
      exp_row(from_ref.row(t), [=](int64_t d) { return r[d] - r_ref[d]; });
    }
    for (int64_t n = 0; n < len; n += kSubChunk) {
      Block<T>& f = to_ref_.emplace_back(first_near_column(n), K);
      for (int64_t j = 0; j < first_near_column(n); ++j) {
        const double *r_n = R.row(n), *g_j = G.row(j);
        exp_row(f.row(j), [=](int64_t d) { return r_n[d] - g_j[d]; });
      }
    }
    const int64_t width = kPerChannel ? K : 1;
    pair_.resize(static_cast<size_t>(len * (kSubChunk + row_shift) * width));
    for (int64_t i = 0; i < len; ++i) {
      for (int64_t j = first_near_column(i - i % kSubChunk); j <= i - row_shift; ++j) {
        T* f = pair_.data() + pair_index(i, j) * width;
#pragma omp simd
        for (int64_t d = 0; d < width; ++d) f[d] = static_cast<T>(std::exp(R(i, d) - G(j, d)));
      }
    }
  }
  int64_t row_shift() const { return row_shift_; }
  // The first column paired element by element with the sub-chunk starting at row n.
  int64_t first_near_column(int64_t n) const { return std::max<int64_t>(0, n - row_shift_); }
  // exp(R_i − G_j) for first_near_column(n(i)) ≤ j ≤ i − row_shift: kPerChannel ? K factors : one.
  const T* pair(int64_t i, int64_t j) const { return pair_.data() + pair_index(i, j) * (kPerChannel ? key_dim_ : 1); }
  // exp(R_n − G_j) for j < first_near_column(n), n the first row of a sub-chunk.
  const Block<T>& to_ref(int64_t n) const { return to_ref_[static_cast<size_t>(n / kSubChunk)]; }

  Block<T> gamma, to_end;  // exp(G), exp(G_L − G)
  Block<T> row_gamma;      // exp(R)
  Block<T> from_ref;       // exp(R_i − R_n(i)), n(i) the first row of i's sub-chunk

 private:
  int64_t pair_index(int64_t i, int64_t j) const {
    return i * (kSubChunk + row_shift_) + j - first_near_column(i - i % kSubChunk);
  }
  int64_t row_shift_, key_dim_;
  std::vector<Block<T>> to_ref_;
  std::vector<T> pair_;
};

enum class Causal { strict, inclusive };  // pairs j < i − shift, or j ≤ i − shift
// The last column j paired with row i.
template <class T, bool kPerChannel>
int64_t last_pair(int64_t i, Causal mask, const ChunkDecay<T, kPerChannel>& decay) {
  return (mask == Causal::strict ? i - 1 : i) - decay.row_shift();
}

// M_ij = Σ_d X_id Y_jd exp(R_id − G_jd) for the pairs of `mask`, 0 elsewhere. X, Y: [L, K].
// For the sub-chunk I starting at row n, with c its first near column, the pairs with the columns
// before c are one matmul, M_{I,<c} = (X_I ⊙ from_ref_I) (Y_{<c} ⊙ to_ref(n))ᵀ; the others go element
// by element. The far pairs must all be causal, so a row shift of 1 needs the inclusive mask (pairs
// j ≤ i − 1: RWKV-6 reads S_{i−1}); a row shift of 0 takes either mask.
template <class T, bool kPerChannel>
Block<T> decayed_gram(const Block<T>& X, const Block<T>& Y, const ChunkDecay<T, kPerChannel>& decay, Causal mask) {
  const int64_t L = X.rows(), K = X.cols();
  Block<T> M(L, L);
  for (int64_t n = 0; n < L; n += kSubChunk) {
    const int64_t rows = std::min(kSubChunk, L - n), far = decay.first_near_column(n);
    if (far > 0) {
      const Block<T> x = rows_times(X, decay.from_ref, n, rows), y = rows_times(Y, decay.to_ref(n), 0, far);
      gemm<T>(false, true, rows, far, K, T(1), x.data(), K, y.data(), K, T(0), M.row(n), L);
    }
    for (int64_t i = n; i < n + rows; ++i) {
      const T* x = X.row(i);
      for (int64_t j = far; j <= last_pair(i, mask, decay); ++j) {
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

// Backward of decayed_gram, reading dM only at the pairs of `mask`. With e_ijd = exp(R_id − G_jd)
// and c_ijd = dM_ij X_id Y_jd e_ijd:
//   dX_id += Σ_j dM_ij Y_jd e_ijd,   dY_jd += Σ_i dM_ij X_id e_ijd,
//   dG_{i−shift,d} += Σ_j c_ijd,  dG_jd −= Σ_i c_ijd   (R_i = G_{i−shift} enters with +, G_j with −).
// For the far pairs (j < c, x̃ = X_I ⊙ from_ref_I, ỹ = Y_{<c} ⊙ to_ref(n)): dx̃ = dM_{I,<c} ỹ and
// dỹ = dM_{I,<c}ᵀ x̃ are matmuls, dX_I += dx̃ ⊙ from_ref_I, and Σ_j c_ijd = X_id (dx̃ ⊙ from_ref)_id
// (likewise for Y). A pair with j = i − shift (e = 1) adds and removes the same c, so it is skipped in
// dG: exact cancelling terms would only leave rounding residue, which under strong decay can exceed
// dg itself. For a scalar decay dG is summed over channels later.
template <class T, bool kPerChannel>
void decayed_gram_backward(const Block<T>& dM, const Block<T>& X, const Block<T>& Y,
                           const ChunkDecay<T, kPerChannel>& decay, Causal mask, Block<T>& dX, Block<T>& dY,
                           Block<T>& dG) {
  const int64_t L = X.rows(), K = X.cols(), shift = decay.row_shift();
  for (int64_t n = 0; n < L; n += kSubChunk) {
    const int64_t rows = std::min(kSubChunk, L - n), far = decay.first_near_column(n);
    if (far > 0) {
      const Block<T>& to_ref = decay.to_ref(n);
      const Block<T> x = rows_times(X, decay.from_ref, n, rows), y = rows_times(Y, to_ref, 0, far);
      Block<T> dx(rows, K), dy(far, K);
      gemm<T>(false, false, rows, K, far, T(1), dM.row(n), L, y.data(), K, T(0), dx.data(), K);
      gemm<T>(true, false, far, K, rows, T(1), dM.row(n), L, x.data(), K, T(0), dy.data(), K);
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t d = 0; d < K; ++d) {
          const T through_pairs = dx(i, d) * decay.from_ref(n + i, d);
          dX(n + i, d) += through_pairs;
          dG(n + i - shift, d) += X(n + i, d) * through_pairs;
        }
      }
      for (int64_t j = 0; j < far; ++j) {
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
      for (int64_t j = far; j <= last_pair(i, mask, decay); ++j) {
        const T m = dM(i, j);
        if (m == T(0)) continue;
        const T* y = Y.row(j);
        T* dy = dY.row(j);
        T* dG_i = dG.row(i - shift);
        T* dG_j = dG.row(j);
        const T* f = decay.pair(i, j);
        const T through_dG = j == i - shift ? T(0) : T(1);  // such a pair adds exactly 0 to dG
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

}  // namespace linea::cpu

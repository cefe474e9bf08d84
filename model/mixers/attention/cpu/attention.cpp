#include "model/mixers/attention/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vector_math.h"

namespace linea::cpu {

namespace {

// Queries go in blocks of up to kQueryBlock tokens of one sequence: the scores of a block against
// all the keys that its queries see are one matmul, and so are the products with V (and, in the
// backward, with dO, K and Q).
inline constexpr int64_t kQueryBlock = 64;

// Which keys a query sees: s ∈ [first_key(t), t], i.e. the tokens of t's own sequence with
// t − s < window (window 0 = unlimited).
class CausalWindow {
 public:
  CausalWindow(const SeqLayout& seqs, int64_t window) : window_(window), seq_begin_(seqs.num_tokens()) {
    for (int64_t i = 0; i < seqs.num_seqs(); ++i) {
      for (int64_t t = seqs.begin(i); t < seqs.end(i); ++t) seq_begin_[t] = seqs.begin(i);
    }
  }
  int64_t first_key(int64_t t) const { return window_ > 0 ? std::max(seq_begin_[t], t - window_ + 1) : seq_begin_[t]; }

 private:
  int64_t window_;
  std::vector<int64_t> seq_begin_;
};

// The [N, heads·Dh] activations seen as one matrix per head: row t of head h starts at
// (t·heads + h)·Dh, and consecutive rows are heads·Dh apart (the leading dimension for gemm).
struct HeadRows {
  int64_t heads, head_dim;
  template <class P>
  P* at(P* base, int64_t token, int64_t head) const {
    return base + (token * heads + head) * head_dim;
  }
  int64_t stride() const { return heads * head_dim; }
};

// Queries [t0, t1) of one sequence and the keys [k0, t1) that they see between them.
struct QueryBlock {
  int64_t t0, t1, k0;
  int64_t rows() const { return t1 - t0; }
  int64_t keys() const { return t1 - k0; }
};

// The block of sequence `seq` that starts at query t0.
QueryBlock query_block(const SeqLayout& seqs, int64_t seq, int64_t t0, const CausalWindow& window) {
  return {t0, std::min(t0 + kQueryBlock, seqs.end(seq)), window.first_key(t0)};
}

// The query blocks of every sequence, in order.
std::vector<QueryBlock> query_blocks(const SeqLayout& seqs, const CausalWindow& window) {
  std::vector<QueryBlock> blocks;
  for (int64_t i = 0; i < seqs.num_seqs(); ++i) {
    for (int64_t t0 = seqs.begin(i); t0 < seqs.end(i); t0 += kQueryBlock) {
      blocks.push_back(query_block(seqs, i, t0, window));
    }
  }
  return blocks;
}

// Z = scale · Q_block K_keysᵀ for query head h and kv head g: [rows, keys], row-major.
template <class T>
void scores(T* Z, const QueryBlock& b, const T* q, const T* k, int64_t h, int64_t g, const HeadRows& qrows,
            const HeadRows& kvrows, T scale) {
  gemm<T>(false, true, b.rows(), b.keys(), qrows.head_dim, scale, qrows.at(q, b.t0, h), qrows.stride(),
          kvrows.at(k, b.k0, g), kvrows.stride(), T(0), Z, b.keys());
}

// The keys that query t of the block sees, as columns [first, last] of the block's scores.
struct SeenKeys {
  int64_t first, last;
};
SeenKeys seen_keys(const QueryBlock& b, const CausalWindow& window, int64_t t) {
  return {window.first_key(t) - b.k0, t - b.k0};
}

}  // namespace

// Per query token t and query head h (kv head g = h / (Hq/Hkv)):
//   z_s = scale · q_t·k_s for s ∈ window(t),   m = max_s z_s,   l = Σ_s exp(z_s − m)
//   P_ts = exp(z_s − m) / l (0 outside the window),   o_t = Σ_s P_ts v_s,   lse_t = m + log l
// computed a block of queries at a time: Z = scale · Q Kᵀ and O = P V are matmuls.
template <class T>
void attention_forward(T* out, T* lse, const T* q, const T* k, const T* v, const ops::AttentionShape& shape,
                       const SeqLayout& seqs) {
  const int64_t hq = shape.q_heads, group = shape.q_heads / shape.kv_heads;
  const T scale = static_cast<T>(shape.scale);
  const HeadRows qrows{hq, shape.head_dim}, kvrows{shape.kv_heads, shape.head_dim};
  const CausalWindow window(seqs, shape.window);
  const std::vector<QueryBlock> blocks = query_blocks(seqs, window);
  const int64_t tasks = static_cast<int64_t>(blocks.size()) * hq;

#pragma omp parallel
  {
    std::vector<T> P;
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const QueryBlock& b = blocks[static_cast<size_t>(task / hq)];
      const int64_t h = task % hq, g = h / group;
      P.resize(static_cast<size_t>(b.rows() * b.keys()));
      scores(P.data(), b, q, k, h, g, qrows, kvrows, scale);
      for (int64_t t = b.t0; t < b.t1; ++t) {
        T* p = P.data() + (t - b.t0) * b.keys();
        const SeenKeys seen = seen_keys(b, window, t);
        const T m = max_of(p + seen.first, seen.last - seen.first + 1);
        T l = 0;
#pragma omp simd reduction(+ : l)
        for (int64_t s = seen.first; s <= seen.last; ++s) {
          p[s] = std::exp(p[s] - m);
          l += p[s];
        }
        const T inv_l = T(1) / l;  // l ≥ 1: t always sees itself
        std::fill(p, p + seen.first, T(0));
#pragma omp simd
        for (int64_t s = seen.first; s <= seen.last; ++s) p[s] *= inv_l;
        std::fill(p + seen.last + 1, p + b.keys(), T(0));
        lse[t * hq + h] = m + std::log(l);
      }
      gemm<T>(false, false, b.rows(), shape.head_dim, b.keys(), T(1), P.data(), b.keys(), kvrows.at(v, b.k0, g),
              kvrows.stride(), T(0), qrows.at(out, b.t0, h), qrows.stride());
    }
  }
}

// With P_ts = exp(scale · q_t·k_s − lse_t), dP_ts = dout_t·v_s, D_t = dout_t·o_t = Σ_s P_ts dP_ts
// (formed as the last sum, from the same P and dP as dS, so that Σ_s dS_ts = 0 up to rounding and a
// query that sees only itself gets dS = 0 exactly; `out` is not read):
//   dS_ts = P_ts (dP_ts − D_t)
//   dq_t = scale Σ_s dS_ts k_s
//   dk_s = scale Σ_{t, h in s's group} dS_ts q_t,   dv_s = Σ_{t, h in s's group} P_ts dout_t
// One task per (sequence, kv head g) walks the query blocks of its sequence and the query heads of
// g in a fixed order: dP = dO Vᵀ, dQ = scale · dS K, dK += scale · dSᵀ Q and dV += Pᵀ dO are
// matmuls, and no two threads write the same row.
template <class T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* /*out*/,
                        const T* lse, const ops::AttentionShape& shape, const SeqLayout& seqs) {
  const int64_t hq = shape.q_heads, hkv = shape.kv_heads, dh = shape.head_dim;
  const int64_t group = hq / hkv;
  const T scale = static_cast<T>(shape.scale);
  const HeadRows qrows{hq, dh}, kvrows{hkv, dh};
  const CausalWindow window(seqs, shape.window);
  const int64_t tasks = seqs.num_seqs() * hkv;

#pragma omp parallel
  {
    std::vector<T> P, dS;
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t seq = task / hkv, g = task % hkv;
      for (int64_t s = seqs.begin(seq); s < seqs.end(seq); ++s) {
        std::fill_n(kvrows.at(dk, s, g), dh, T(0));
        std::fill_n(kvrows.at(dv, s, g), dh, T(0));
      }
      for (int64_t t0 = seqs.begin(seq); t0 < seqs.end(seq); t0 += kQueryBlock) {
        const QueryBlock b = query_block(seqs, seq, t0, window);
        const int64_t keys = b.keys();
        P.resize(static_cast<size_t>(b.rows() * keys));
        dS.resize(P.size());
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
          scores(P.data(), b, q, k, h, g, qrows, kvrows, scale);
          gemm<T>(false, true, b.rows(), keys, dh, T(1), qrows.at(dout, b.t0, h), qrows.stride(), kvrows.at(v, b.k0, g),
                  kvrows.stride(), T(0), dS.data(), keys);  // dP
          for (int64_t t = b.t0; t < b.t1; ++t) {
            T* p = P.data() + (t - b.t0) * keys;
            T* ds = dS.data() + (t - b.t0) * keys;
            const SeenKeys seen = seen_keys(b, window, t);
            const T lse_t = lse[t * hq + h];
            T delta = 0;  // D_t
#pragma omp simd reduction(+ : delta)
            for (int64_t s = seen.first; s <= seen.last; ++s) {
              p[s] = std::exp(p[s] - lse_t);
              delta += p[s] * ds[s];
            }
#pragma omp simd
            for (int64_t s = seen.first; s <= seen.last; ++s) ds[s] = p[s] * (ds[s] - delta);
            std::fill(p, p + seen.first, T(0));
            std::fill(ds, ds + seen.first, T(0));
            std::fill(p + seen.last + 1, p + keys, T(0));
            std::fill(ds + seen.last + 1, ds + keys, T(0));
          }
          gemm<T>(false, false, b.rows(), dh, keys, scale, dS.data(), keys, kvrows.at(k, b.k0, g), kvrows.stride(),
                  T(0), qrows.at(dq, b.t0, h), qrows.stride());
          gemm<T>(true, false, keys, dh, b.rows(), scale, dS.data(), keys, qrows.at(q, b.t0, h), qrows.stride(), T(1),
                  kvrows.at(dk, b.k0, g), kvrows.stride());
          gemm<T>(true, false, keys, dh, b.rows(), T(1), P.data(), keys, qrows.at(dout, b.t0, h), qrows.stride(), T(1),
                  kvrows.at(dv, b.k0, g), kvrows.stride());
        }
      }
    }
  }
}

template void attention_forward<float>(float*, float*, const float*, const float*, const float*,
                                       const ops::AttentionShape&, const SeqLayout&);
template void attention_forward<double>(double*, double*, const double*, const double*, const double*,
                                        const ops::AttentionShape&, const SeqLayout&);
template void attention_backward<float>(float*, float*, float*, const float*, const float*, const float*, const float*,
                                        const float*, const float*, const ops::AttentionShape&, const SeqLayout&);
template void attention_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                         const double*, const double*, const double*, const ops::AttentionShape&,
                                         const SeqLayout&);

}  // namespace linea::cpu

#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace linea::cpu {

namespace {

// Σ a_i b_i; `omp simd` lets the compiler split the sum over vector lanes (in a fixed order).
template <class T>
T dot(const T* a, const T* b, int64_t n) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y += alpha · x
template <class T>
void axpy(T alpha, const T* x, T* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

// Which keys a query sees: s ∈ [first_key(t), t], i.e. the tokens of t's own sequence with
// t − s < window (window 0 = unlimited). Conversely key s is seen by queries t ∈ [s, last_query(s)].
class CausalWindow {
 public:
  CausalWindow(const SeqLayout& seqs, int64_t window)
      : window_(window), seq_begin_(seqs.num_tokens()), seq_end_(seqs.num_tokens()) {
    for (int64_t i = 0; i < seqs.num_seqs(); ++i) {
      for (int64_t t = seqs.begin(i); t < seqs.end(i); ++t) {
        seq_begin_[t] = seqs.begin(i);
        seq_end_[t] = seqs.end(i);
      }
    }
  }
  int64_t first_key(int64_t t) const { return window_ > 0 ? std::max(seq_begin_[t], t - window_ + 1) : seq_begin_[t]; }
  int64_t last_query(int64_t s) const { return window_ > 0 ? std::min(seq_end_[s], s + window_) - 1 : seq_end_[s] - 1; }

 private:
  int64_t window_;
  std::vector<int64_t> seq_begin_, seq_end_;
};

// Row pointers into the [N, heads·Dh] activations.
struct HeadRows {
  int64_t heads, head_dim;
  template <class P>
  P* at(P* base, int64_t token, int64_t head) const {
    return base + (token * heads + head) * head_dim;
  }
};

}  // namespace

// Per query token t and query head h (kv head g = h / (Hq/Hkv)), with online max subtraction:
//   z_s = scale · q_t·k_s for s ∈ window(t),   m = max_s z_s,   l = Σ_s exp(z_s − m)
//   o_t = Σ_s exp(z_s − m) v_s / l,            lse_t = m + log l
// When a new maximum m' appears, the running l and o are rescaled by exp(m − m') ≤ 1.
template <class T>
void attention_forward(T* out, T* lse, const T* q, const T* k, const T* v, const ops::AttentionShape& shape,
                       const SeqLayout& seqs) {
  const int64_t n = seqs.num_tokens(), hq = shape.q_heads, dh = shape.head_dim;
  const int64_t group = shape.q_heads / shape.kv_heads;
  const T scale = static_cast<T>(shape.scale);
  const HeadRows qrows{hq, dh}, kvrows{shape.kv_heads, dh};
  const CausalWindow window(seqs, shape.window);

#pragma omp parallel for collapse(2) schedule(dynamic, 16)
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t g = h / group;
      const T* qt = qrows.at(q, t, h);
      T* ot = qrows.at(out, t, h);
      std::fill(ot, ot + dh, T(0));
      T m = -std::numeric_limits<T>::infinity(), l = 0;
      for (int64_t s = window.first_key(t); s <= t; ++s) {
        const T z = scale * dot(qt, kvrows.at(k, s, g), dh);
        if (z > m) {
          const T rescale = std::exp(m - z);  // 0 on the first key (m = −∞)
          l *= rescale;
          for (int64_t i = 0; i < dh; ++i) ot[i] *= rescale;
          m = z;
        }
        const T p = std::exp(z - m);
        l += p;
        axpy(p, kvrows.at(v, s, g), ot, dh);
      }
      for (int64_t i = 0; i < dh; ++i) ot[i] /= l;  // l ≥ 1: t always sees itself
      lse[t * hq + h] = m + std::log(l);
    }
  }
}

// With P_ts = exp(scale · q_t·k_s − lse_t), dP_ts = dout_t·v_s, D_t = dout_t·o_t = Σ_s P_ts dP_ts:
//   dS_ts = P_ts (dP_ts − D_t)
//   dq_t = scale Σ_s dS_ts k_s
//   dk_s = scale Σ_{t, h in s's group} dS_ts q_t,   dv_s = Σ_{t, h in s's group} P_ts dout_t
// dq is gathered per (t, h) and dk, dv per (s, g), so no two threads write the same row.
template <class T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                        const T* lse, const ops::AttentionShape& shape, const SeqLayout& seqs) {
  const int64_t n = seqs.num_tokens(), hq = shape.q_heads, hkv = shape.kv_heads, dh = shape.head_dim;
  const int64_t group = hq / hkv;
  const T scale = static_cast<T>(shape.scale);
  const HeadRows qrows{hq, dh}, kvrows{hkv, dh};
  const CausalWindow window(seqs, shape.window);

  std::vector<T> delta(static_cast<size_t>(n * hq));  // D_t per query head
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < hq; ++h) delta[t * hq + h] = dot(qrows.at(dout, t, h), qrows.at(out, t, h), dh);
  }

#pragma omp parallel for collapse(2) schedule(dynamic, 16)
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t g = h / group;
      const T* qt = qrows.at(q, t, h);
      const T* dout_t = qrows.at(dout, t, h);
      T* dqt = qrows.at(dq, t, h);
      std::fill(dqt, dqt + dh, T(0));
      for (int64_t s = window.first_key(t); s <= t; ++s) {
        const T* ks = kvrows.at(k, s, g);
        const T p = std::exp(scale * dot(qt, ks, dh) - lse[t * hq + h]);
        const T ds = p * (dot(dout_t, kvrows.at(v, s, g), dh) - delta[t * hq + h]);
        axpy(scale * ds, ks, dqt, dh);
      }
    }
  }

#pragma omp parallel for collapse(2) schedule(dynamic, 16)
  for (int64_t s = 0; s < n; ++s) {
    for (int64_t g = 0; g < hkv; ++g) {
      const T* ks = kvrows.at(k, s, g);
      const T* vs = kvrows.at(v, s, g);
      T* dks = kvrows.at(dk, s, g);
      T* dvs = kvrows.at(dv, s, g);
      std::fill(dks, dks + dh, T(0));
      std::fill(dvs, dvs + dh, T(0));
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        for (int64_t t = s; t <= window.last_query(s); ++t) {
          const T* qt = qrows.at(q, t, h);
          const T* dout_t = qrows.at(dout, t, h);
          const T p = std::exp(scale * dot(qt, ks, dh) - lse[t * hq + h]);
          const T ds = p * (dot(dout_t, vs, dh) - delta[t * hq + h]);
          axpy(p, dout_t, dvs, dh);
          axpy(scale * ds, qt, dks, dh);
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

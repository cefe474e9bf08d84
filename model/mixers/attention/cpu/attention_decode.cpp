#include "model/mixers/attention/cpu/attention_decode.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace linea::cpu {

template <class T>
void attention_over_cache(T* out, const T* q, int64_t n, int64_t first_query, const T* k, const T* v, int64_t L,
                          int64_t first_key, const ops::AttentionShape& shape) {
  const int64_t Hq = shape.q_heads, Hkv = shape.kv_heads, Dh = shape.head_dim, group = Hq / Hkv;
  std::vector<double> score(static_cast<size_t>(L)), acc(static_cast<size_t>(Dh));
#pragma omp parallel for collapse(2) firstprivate(score, acc) if (n * Hq * L * Dh > 65536)
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t p = first_query + i, kv = h / group;
      // keys j ∈ [j0, j1): positions in (p − window, p]
      const int64_t j1 = std::min(L, p - first_key + 1);
      const int64_t j0 = shape.window > 0 ? std::max<int64_t>(0, p - shape.window + 1 - first_key) : 0;
      const T* qi = q + (i * Hq + h) * Dh;
      double m = -INFINITY;
      for (int64_t j = j0; j < j1; ++j) {
        const T* kj = k + (j * Hkv + kv) * Dh;
        double dot = 0;
        for (int64_t d = 0; d < Dh; ++d) dot += double(qi[d]) * double(kj[d]);
        score[j] = shape.scale * dot;
        m = std::max(m, score[j]);
      }
      // softmax with the max subtracted: Σ_j e^{s_j − m} v_j / Σ_j e^{s_j − m}
      std::fill(acc.begin(), acc.end(), 0.0);
      double total = 0;
      for (int64_t j = j0; j < j1; ++j) {
        const double w = std::exp(score[j] - m);
        total += w;
        const T* vj = v + (j * Hkv + kv) * Dh;
        for (int64_t d = 0; d < Dh; ++d) acc[d] += w * double(vj[d]);
      }
      T* oi = out + (i * Hq + h) * Dh;
      for (int64_t d = 0; d < Dh; ++d) oi[d] = static_cast<T>(total > 0 ? acc[d] / total : 0.0);
    }
  }
}

template void attention_over_cache<float>(float*, const float*, int64_t, int64_t, const float*, const float*, int64_t,
                                          int64_t, const ops::AttentionShape&);
template void attention_over_cache<double>(double*, const double*, int64_t, int64_t, const double*, const double*,
                                           int64_t, int64_t, const ops::AttentionShape&);

}  // namespace linea::cpu

#include "model/mixers/attention/cpu/attention_decode.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace linea::cpu {

template <class T>
void attention_over_cache(T* out, const T* q, const int32_t* queries, int64_t n, const T* k, const T* v,
                          int64_t capacity, const ops::AttentionShape& shape) {
  const int64_t Hq = shape.q_heads, Hkv = shape.kv_heads, Dh = shape.head_dim, group = Hq / Hkv;
  const int64_t width = Hkv * Dh;
  const int64_t keys = shape.window > 0 ? std::min<int64_t>(shape.window, capacity) : capacity;
  std::vector<double> score(static_cast<size_t>(keys)), acc(static_cast<size_t>(Dh));
#pragma omp parallel for collapse(2) firstprivate(score, acc) if (n * Hq * keys * Dh > 65536)
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t s = queries[2 * i], p = queries[2 * i + 1], kv = h / group;
      // keys at positions [j0, p]: those in (p − window, p]
      const int64_t j0 = shape.window > 0 ? std::max<int64_t>(0, p - shape.window + 1) : 0;
      const auto row = [&](int64_t j) { return (s * capacity + j % capacity) * width + kv * Dh; };
      const T* qi = q + (i * Hq + h) * Dh;
      double m = -INFINITY;
      for (int64_t j = j0; j <= p; ++j) {
        const T* kj = k + row(j);
        double dot = 0;
        for (int64_t d = 0; d < Dh; ++d) dot += double(qi[d]) * double(kj[d]);
        score[j - j0] = shape.scale * dot;
        m = std::max(m, score[j - j0]);
      }
      // softmax with the max subtracted: Σ_j e^{s_j − m} v_j / Σ_j e^{s_j − m}
      std::fill(acc.begin(), acc.end(), 0.0);
      double total = 0;
      for (int64_t j = j0; j <= p; ++j) {
        const double w = std::exp(score[j - j0] - m);
        total += w;
        const T* vj = v + row(j);
        for (int64_t d = 0; d < Dh; ++d) acc[d] += w * double(vj[d]);
      }
      T* oi = out + (i * Hq + h) * Dh;
      for (int64_t d = 0; d < Dh; ++d) oi[d] = static_cast<T>(acc[d] / total);
    }
  }
}

template void attention_over_cache<float>(float*, const float*, const int32_t*, int64_t, const float*, const float*,
                                          int64_t, const ops::AttentionShape&);
template void attention_over_cache<double>(double*, const double*, const int32_t*, int64_t, const double*,
                                           const double*, int64_t, const ops::AttentionShape&);

}  // namespace linea::cpu

#include "model/mixers/hgrn/cpu/hgrn_chunked.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/parallel.h"

namespace linea::cpu {

namespace {

// One sequence seen as the scan z_s = exp(l_s) z_{s−1} + y_s, s = 0 … len − 1, over rows of D
// channels: log_decay(s) and input(s) point at the rows of l and y, output(s) at the row of z.
// Forward: s = t − begin. Reverse: s = end − 1 − t, with l_0 = 0 (dht enters undecayed).
template <class T, class LogDecay, class Input, class Output>
void chunked_scan(int64_t len, int64_t D, LogDecay log_decay, Input input, Output output, const T* z_in) {
  if (len == 0) return;
  const int64_t chunks = (len + kHgrnChunk - 1) / kHgrnChunk;
  std::vector<T> L(static_cast<size_t>(len * D));  // log decay cumulated from the chunk start
  const bool parallel = worth_parallel(len * D);
  // 1. Local scans (output holds w).
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t n = 0; n < chunks; ++n) {
    const int64_t first = n * kHgrnChunk, last = std::min(len, first + kHgrnChunk);
    for (int64_t s = first; s < last; ++s) {
      const T *l = log_decay(s), *y = input(s);
      T *cum = L.data() + s * D, *w = output(s);
      const T* cum_prev = s > first ? cum - D : nullptr;
      const T* w_prev = s > first ? output(s - 1) : nullptr;
      for (int64_t c = 0; c < D; ++c) {
        cum[c] = (cum_prev ? cum_prev[c] : T(0)) + (l ? l[c] : T(0));
        w[c] = (w_prev ? std::exp(l ? l[c] : T(0)) * w_prev[c] : T(0)) + y[c];
      }
    }
  }
  // 2. Carries: carry[n] is z entering chunk n.
  std::vector<T> carry(static_cast<size_t>(chunks * D), T(0));
  if (z_in) std::copy_n(z_in, D, carry.begin());
  for (int64_t n = 0; n + 1 < chunks; ++n) {
    const int64_t last = (n + 1) * kHgrnChunk - 1;
    const T *cum = L.data() + last * D, *w = output(last), *c_n = carry.data() + n * D;
    T* c_next = carry.data() + (n + 1) * D;
    for (int64_t c = 0; c < D; ++c) c_next[c] = std::exp(cum[c]) * c_n[c] + w[c];
  }
  // 3. z_s = exp(L_s) c_n + w_s.
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t s = 0; s < len; ++s) {
    const T *cum = L.data() + s * D, *c_n = carry.data() + (s / kHgrnChunk) * D;
    T* z = output(s);
    for (int64_t c = 0; c < D; ++c) z[c] += std::exp(cum[c]) * c_n[c];
  }
}

template <class T>
void forward_seq(const HgrnOperands<T>& in, const SeqLayout& seqs, int64_t seq, T* o) {
  const int64_t D = in.channels, begin = seqs.begin(seq);
  chunked_scan<T>(
      seqs.end(seq) - begin, D, [&](int64_t s) { return in.g + (begin + s) * D; },
      [&](int64_t s) { return in.x + (begin + s) * D; }, [&](int64_t s) { return o + (begin + s) * D; },
      in.h0 ? in.h0 + seq * D : nullptr);
}

}  // namespace

template <class T>
void hgrn_chunked_forward(const HgrnOperands<T>& in, const SeqLayout& seqs, T* o, T* ht) {
  const int64_t D = in.channels;
  for (int64_t s = 0; s < seqs.num_seqs(); ++s) {
    forward_seq(in, seqs, s, o);
    if (!ht) continue;
    if (seqs.end(s) > seqs.begin(s)) {
      std::copy_n(o + (seqs.end(s) - 1) * D, D, ht + s * D);
    } else if (in.h0) {  // an empty sequence keeps its initial state
      std::copy_n(in.h0 + s * D, D, ht + s * D);
    } else {
      std::fill_n(ht + s * D, D, T(0));
    }
  }
}

template <class T>
void hgrn_chunked_backward(const HgrnOperands<T>& in, const SeqLayout& seqs, const T* d_o, const T* dht,
                           const HgrnGradients<T>& grads) {
  const int64_t D = in.channels;
  std::vector<T> h(static_cast<size_t>(seqs.num_tokens() * D));
  hgrn_chunked_forward(in, seqs, h.data(), static_cast<T*>(nullptr));
  for (int64_t seq = 0; seq < seqs.num_seqs(); ++seq) {
    const int64_t begin = seqs.begin(seq), end = seqs.end(seq);
    // δ into dx, from the last token back: l_s = g at the token after, 0 for the last one.
    chunked_scan<T>(
        end - begin, D, [&](int64_t s) { return s == 0 ? static_cast<const T*>(nullptr) : in.g + (end - s) * D; },
        [&](int64_t s) { return d_o + (end - 1 - s) * D; }, [&](int64_t s) { return grads.dx + (end - 1 - s) * D; },
        dht ? dht + seq * D : nullptr);
    for_each_block((end - begin) * D, [&](int64_t lo, int64_t hi) {
      for (int64_t i = begin * D + lo; i < begin * D + hi; ++i) {
        const int64_t t = i / D, c = i % D;
        const T h_prev = t > begin ? h[(t - 1) * D + c] : in.h0 ? in.h0[seq * D + c] : T(0);
        grads.dg[i] = grads.dx[i] * std::exp(in.g[i]) * h_prev;
      }
    });
    if (grads.dh0) {
      for (int64_t c = 0; c < D; ++c) {
        grads.dh0[seq * D + c] =
            end > begin ? std::exp(in.g[begin * D + c]) * grads.dx[begin * D + c] : (dht ? dht[seq * D + c] : T(0));
      }
    }
  }
}

template void hgrn_chunked_forward<float>(const HgrnOperands<float>&, const SeqLayout&, float*, float*);
template void hgrn_chunked_forward<double>(const HgrnOperands<double>&, const SeqLayout&, double*, double*);
template void hgrn_chunked_backward<float>(const HgrnOperands<float>&, const SeqLayout&, const float*, const float*,
                                           const HgrnGradients<float>&);
template void hgrn_chunked_backward<double>(const HgrnOperands<double>&, const SeqLayout&, const double*, const double*,
                                            const HgrnGradients<double>&);

}  // namespace linea::cpu

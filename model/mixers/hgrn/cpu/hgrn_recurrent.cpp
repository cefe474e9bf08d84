#include "model/mixers/hgrn/cpu/hgrn_recurrent.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/parallel.h"

namespace linea::cpu {

namespace {

template <class T>
void forward_seq(const HgrnOperands<T>& in, const SeqLayout& seqs, int64_t seq, T* o, T* ht) {
  const int64_t D = in.channels;
  std::vector<T> h(static_cast<size_t>(D), T(0));
  if (in.h0) std::copy_n(in.h0 + seq * D, D, h.begin());
  for (int64_t t = seqs.begin(seq); t < seqs.end(seq); ++t) {
    const T *x = in.x + t * D, *g = in.g + t * D;
    for (int64_t c = 0; c < D; ++c) {
      h[c] = std::exp(g[c]) * h[c] + x[c];
      o[t * D + c] = h[c];
    }
  }
  if (ht) std::copy(h.begin(), h.end(), ht + seq * D);
}

// h: the states of forward_seq (o). Walks the sequence in reverse carrying δ = ∂L/∂h_t.
template <class T>
void backward_seq(const HgrnOperands<T>& in, const SeqLayout& seqs, int64_t seq, const T* h, const T* d_o, const T* dht,
                  const HgrnGradients<T>& grads) {
  const int64_t D = in.channels, begin = seqs.begin(seq);
  std::vector<T> delta(static_cast<size_t>(D), T(0));
  if (dht) std::copy_n(dht + seq * D, D, delta.begin());
  for (int64_t t = seqs.end(seq) - 1; t >= begin; --t) {
    const T* g = in.g + t * D;
    for (int64_t c = 0; c < D; ++c) {
      const T a = std::exp(g[c]);
      const T h_prev = t > begin ? h[(t - 1) * D + c] : in.h0 ? in.h0[seq * D + c] : T(0);
      delta[c] += d_o[t * D + c];
      grads.dx[t * D + c] = delta[c];
      grads.dg[t * D + c] = delta[c] * a * h_prev;
      delta[c] *= a;
    }
  }
  if (grads.dh0) std::copy(delta.begin(), delta.end(), grads.dh0 + seq * D);
}

}  // namespace

template <class T>
void hgrn_recurrent_forward(const HgrnOperands<T>& in, const SeqLayout& seqs, T* o, T* ht) {
#pragma omp parallel for schedule(dynamic) if (worth_parallel(seqs.num_tokens() * in.channels))
  for (int64_t s = 0; s < seqs.num_seqs(); ++s) forward_seq(in, seqs, s, o, ht);
}

template <class T>
void hgrn_recurrent_backward(const HgrnOperands<T>& in, const SeqLayout& seqs, const T* d_o, const T* dht,
                             const HgrnGradients<T>& grads) {
  std::vector<T> h(static_cast<size_t>(seqs.num_tokens() * in.channels));
  hgrn_recurrent_forward(in, seqs, h.data(), static_cast<T*>(nullptr));
#pragma omp parallel for schedule(dynamic) if (worth_parallel(seqs.num_tokens() * in.channels))
  for (int64_t s = 0; s < seqs.num_seqs(); ++s) backward_seq(in, seqs, s, h.data(), d_o, dht, grads);
}

template void hgrn_recurrent_forward<float>(const HgrnOperands<float>&, const SeqLayout&, float*, float*);
template void hgrn_recurrent_forward<double>(const HgrnOperands<double>&, const SeqLayout&, double*, double*);
template void hgrn_recurrent_backward<float>(const HgrnOperands<float>&, const SeqLayout&, const float*, const float*,
                                             const HgrnGradients<float>&);
template void hgrn_recurrent_backward<double>(const HgrnOperands<double>&, const SeqLayout&, const double*,
                                              const double*, const HgrnGradients<double>&);

}  // namespace linea::cpu

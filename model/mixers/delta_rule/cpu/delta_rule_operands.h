// How the CPU delta-rule kernels see their operands (the math is in model/mixers/delta_rule/delta_rule.h).
//
// Every per-token operand is a Rows view of a [N, H, C] buffer: element (token, head, c) sits at
// token·token_stride + head·head_stride + c·channel_stride. A view with channel_stride 0 broadcasts
// one value per (token, head) over its C channels: this is how β becomes the erase gate b = β·1 and
// the write gate w = β·1, and how a scalar decay becomes a per-channel one. Gradients are
// ACCUMULATED through the same kind of view, so a broadcasting view sums its gradient over the
// channels (dβ = Σ_d db_d + Σ_e dw_e, dg = Σ_d dg_d): the chain rule of the broadcast.
// The kernels gather a run of tokens of one head into a dense row-major Block, compute on Blocks,
// and store or add the results back.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/seq_layout.h"
#include "model/mixers/delta_rule/delta_rule.h"

namespace linea::cpu {

template <class P>
struct Rows {
  P* data = nullptr;
  int64_t token_stride = 0, head_stride = 0, channel_stride = 0;

  bool defined() const { return data != nullptr; }
  P& at(int64_t token, int64_t head, int64_t c) const {
    return data[token * token_stride + head * head_stride + c * channel_stride];
  }
  // A contiguous [N, H, C] buffer.
  static Rows dense(P* data, int64_t heads, int64_t channels) { return {data, heads * channels, channels, 1}; }
  // A [N, H] buffer whose one value per (token, head) stands for all channels.
  static Rows broadcast(P* data, int64_t heads) { return {data, heads, 1, 0}; }
};

// The inputs of one call in the general (GDN-2) form: erase gate b ∈ R^K, write gate w ∈ R^V and
// per-channel log decay g ∈ R^K per token and head (log_decay undefined for DecayKind::none).
template <class T>
struct DeltaRuleOperands {
  int64_t heads = 0, key_dim = 0, value_dim = 0;
  ops::DecayKind decay = ops::DecayKind::none;  // chooses the chunked kernel's Gram path (per-channel or not)
  T scale = 1;
  Rows<const T> q, k, v, erase, write, log_decay;
  const T* h0 = nullptr;  // [S, H, K, V] or null (zeros)
};

// Gradients, accumulated (+=). dh0 may be null. dlog_decay is undefined for DecayKind::none.
template <class T>
struct DeltaRuleGradients {
  Rows<T> dq, dk, dv, derase, dwrite, dlog_decay;
  T* dh0 = nullptr;
};

// A dense row-major matrix.
template <class T>
class Block {
 public:
  Block() = default;
  Block(int64_t rows, int64_t cols) : rows_(rows), cols_(cols), data_(static_cast<size_t>(rows * cols), T(0)) {}
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  T& operator()(int64_t i, int64_t j) { return data_[static_cast<size_t>(i * cols_ + j)]; }
  T operator()(int64_t i, int64_t j) const { return data_[static_cast<size_t>(i * cols_ + j)]; }
  T* row(int64_t i) { return data_.data() + i * cols_; }
  const T* row(int64_t i) const { return data_.data() + i * cols_; }
  T* data() { return data_.data(); }
  const T* data() const { return data_.data(); }

 private:
  int64_t rows_ = 0, cols_ = 0;
  std::vector<T> data_;
};

// Block(i, c) = rows.at(first + i, head, c) for i < count, c < channels.
template <class T, class P>
Block<T> gather(const Rows<P>& rows, int64_t first, int64_t count, int64_t head, int64_t channels) {
  Block<T> b(count, channels);
  for (int64_t i = 0; i < count; ++i) {
    if (rows.channel_stride == 1) {  // the common dense case, as one copy
      std::copy_n(&rows.at(first + i, head, 0), channels, b.row(i));
    } else if (rows.channel_stride == 0) {  // one value per (token, head), e.g. β
      std::fill_n(b.row(i), channels, rows.at(first + i, head, 0));
    } else {
      for (int64_t c = 0; c < channels; ++c) b(i, c) = rows.at(first + i, head, c);
    }
  }
  return b;
}

// rows.at(first + i, head, c) += b(i, c); a broadcasting view sums over c.
template <class T>
void scatter_add(const Rows<T>& rows, int64_t first, int64_t head, const Block<T>& b) {
  for (int64_t i = 0; i < b.rows(); ++i) {
    if (rows.channel_stride == 1) {  // the common dense case, vectorized
      T* out = &rows.at(first + i, head, 0);
      const T* in = b.row(i);
#pragma omp simd
      for (int64_t c = 0; c < b.cols(); ++c) out[c] += in[c];
    } else {
      for (int64_t c = 0; c < b.cols(); ++c) rows.at(first + i, head, c) += b(i, c);
    }
  }
}

// rows.at(first + i, head, c) = b(i, c) (rows must not broadcast).
template <class T>
void store(const Rows<T>& rows, int64_t first, int64_t head, const Block<T>& b) {
  for (int64_t i = 0; i < b.rows(); ++i) {
    for (int64_t c = 0; c < b.cols(); ++c) rows.at(first + i, head, c) = b(i, c);
  }
}

// Whether a call has enough work (tokens·H·K·V) for the OpenMP loop over (sequence, head) to pay
// for starting threads; tiny calls (finite-difference tests) run on the calling thread.
template <class T>
bool worth_threads(const DeltaRuleOperands<T>& in, const SeqLayout& seqs) {
  return seqs.num_seqs() * in.heads > 1 && seqs.num_tokens() * in.heads * in.key_dim * in.value_dim >= (1 << 16);
}

// Offset of the (sequence, head) state in an [S, H, K, V] buffer.
inline int64_t state_offset(int64_t seq, int64_t head, int64_t heads, int64_t key_dim, int64_t value_dim) {
  return (seq * heads + head) * key_dim * value_dim;
}

// The state entering sequence `seq` for head `head`: h0's, or zeros.
template <class T>
Block<T> initial_state(const DeltaRuleOperands<T>& in, int64_t seq, int64_t head) {
  Block<T> S(in.key_dim, in.value_dim);
  if (in.h0) {
    const T* h0 = in.h0 + state_offset(seq, head, in.heads, in.key_dim, in.value_dim);
    std::copy_n(h0, in.key_dim * in.value_dim, S.data());
  }
  return S;
}

}  // namespace linea::cpu

// What the chunked CPU kernels of every mixer family compute on (kernels/chunk/cpu/):
//
// Rows: a view of a per-token operand in a [N, H, C] buffer: element (token, head, c) sits at
// token·token_stride + head·head_stride + c·channel_stride. A view with channel_stride 0 broadcasts
// one value per (token, head) over its C channels (β as a per-channel gate, a scalar decay as a
// per-channel one), one with token_stride 0 as well one value per head over the tokens (a fixed
// decay). Gradients are ACCUMULATED through the same kind of view, so a broadcasting view sums its
// gradient (dβ = Σ_d db_d, dg = Σ_d dg_d): the chain rule of the broadcast.
// Block: a dense row-major matrix; the kernels gather a run of tokens of one head into Blocks,
// compute on Blocks, and store or add the results back. And what every family's kernels do per
// (sequence, head): load, store and add states of [S, H, K, V] buffers, and the OpenMP loop over
// the pairs (for_each_sequence_head).
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/seq_layout.h"

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
  // A [H] buffer whose one value per head stands for every token and channel.
  static Rows per_head(P* data) { return {data, 0, 1, 0}; }
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

// Offset of the (sequence, head) state in an [S, H, K, V] buffer.
inline int64_t state_offset(int64_t seq, int64_t head, int64_t heads, int64_t key_dim, int64_t value_dim) {
  return (seq * heads + head) * key_dim * value_dim;
}

// What the kernels of a family need of its operands below: heads, key_dim, value_dim, and h0 (an
// [S, H, K, V] buffer or null).

// The (seq, head) state of an [S, H, K, V] buffer, or zeros for a null one.
template <class T>
Block<T> load_state(const T* states, int64_t seq, int64_t head, int64_t heads, int64_t key_dim, int64_t value_dim) {
  Block<T> S(key_dim, value_dim);
  if (states) std::copy_n(states + state_offset(seq, head, heads, key_dim, value_dim), key_dim * value_dim, S.data());
  return S;
}

// The state entering sequence `seq` for head `head`: h0's, or zeros.
template <class Operands>
auto initial_state(const Operands& in, int64_t seq, int64_t head) {
  return load_state(in.h0, seq, head, in.heads, in.key_dim, in.value_dim);
}

// states[seq, head] = S (store) or += S (add), for an [S, H, K, V] buffer.
template <class T>
void store_state(const Block<T>& S, T* states, int64_t seq, int64_t head, int64_t heads) {
  std::copy_n(S.data(), S.rows() * S.cols(), states + state_offset(seq, head, heads, S.rows(), S.cols()));
}
template <class T>
void add_state(const Block<T>& S, T* states, int64_t seq, int64_t head, int64_t heads) {
  T* out = states + state_offset(seq, head, heads, S.rows(), S.cols());
  for (int64_t i = 0; i < S.rows() * S.cols(); ++i) out[i] += S.data()[i];
}

// Runs task(seq, head) for every (sequence, head) pair, over OpenMP threads when the call has
// enough work (tokens·H·K·V ≥ 2^16) for starting them to pay; tiny calls (finite-difference tests)
// run on the calling thread.
template <class Operands, class Task>
void for_each_sequence_head(const Operands& in, const SeqLayout& seqs, Task task) {
  const int64_t tasks = seqs.num_seqs() * in.heads;
  const bool parallel = tasks > 1 && seqs.num_tokens() * in.heads * in.key_dim * in.value_dim >= (int64_t{1} << 16);
#pragma omp parallel for schedule(dynamic) if (parallel)
  for (int64_t i = 0; i < tasks; ++i) task(i / in.heads, i % in.heads);
}

}  // namespace linea::cpu

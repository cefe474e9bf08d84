// InputHistory: the last R inputs of each of S sequences, [S, R, C] on the layer's device (zeros
// before a sequence's start), for decoding through ops that look R tokens back (a short causal conv of
// kernel R + 1, RWKV-6's token shift with R = 1). forward() runs such an op over new tokens x [N, C]
// of S sequences (layout `seqs`) continuing them: on [history_s ; x_s] for every s (R more rows per
// sequence, as documents of their own), keeping the rows of x's positions, and updates the history
// to the last R rows of every extended sequence: the same rows as one forward over the whole
// sequences, since the op would have read zeros before each start too. Each move of rows is one
// ops::copy_rows (on CUDA an upload of its index pairs and one kernel). Before any token (a prefill
// from empty states) the history is all zeros, so the op runs on x and seqs themselves — the
// computation of the full forward — and only the last R rows of each sequence are copied.
#pragma once
#include <cstdint>
#include <functional>

#include "kernels/seq_layout.h"
#include "kernels/tensor.h"
#include "model/step_context.h"

namespace linea {

class InputHistory {
 public:
  InputHistory() = default;
  InputHistory(int64_t sequences, int64_t rows, int64_t channels, DType dtype, Device device);

  int64_t rows() const { return history_.defined() ? history_.dim(1) : 0; }
  size_t bytes() const { return history_.defined() ? history_.nbytes() : 0; }

  // op(x', seqs'): the op over rows x' [N', C] of layout seqs', [N', C'] (in ctx.scratch).
  using Op = std::function<Tensor(const Tensor& x, const SeqLayout& seqs)>;
  // op over x [N, C] of `seqs` continuing every sequence's history: [N, C'] (in ctx.scratch); the
  // history then holds the last R inputs of every sequence.
  Tensor forward(StepContext& ctx, const Tensor& x, const SeqLayout& seqs, const Op& op);

 private:
  // [history_s ; x_s] for every sequence s of seqs (in ctx.scratch), and its layout.
  struct Extended {
    Tensor x;
    SeqLayout seqs;
  };
  Extended extend(StepContext& ctx, const Tensor& x, const SeqLayout& seqs) const;
  // The rows of an op's output over `ext` at x's positions, [N, C'] (in ctx.scratch).
  Tensor new_rows(StepContext& ctx, const Tensor& y, const Extended& ext) const;
  // history ← the last R rows of every sequence of x (of a shorter one all its rows, after the rows
  // before them, which stay).
  void keep_last_rows(const Tensor& x, const SeqLayout& seqs);

  Tensor history_;     // [S, R, C]
  bool empty_ = true;  // no token seen yet: history_ is all zeros
};

}  // namespace linea

#include "model/input_history.h"

#include <stdexcept>
#include <string>

#include "model/row_pairs.h"

namespace linea {

InputHistory::InputHistory(int64_t sequences, int64_t rows, int64_t channels, DType dtype, Device device)
    : history_(Tensor::zeros({sequences, rows, channels}, dtype, device)) {}

Tensor InputHistory::forward(StepContext& ctx, const Tensor& x, const SeqLayout& seqs, const Op& op) {
  const int64_t S = seqs.num_seqs(), C = x.dim(1);
  if (history_.dim(0) != S || history_.dim(2) != C) {
    throw std::invalid_argument("InputHistory: a history of " + history_.describe() + " for " + std::to_string(S) +
                                " sequences of " + std::to_string(C) + " channels");
  }
  if (empty_) {  // zeros before every start: the op reads the same on x itself
    Tensor y = op(x, seqs);
    keep_last_rows(x, seqs);
    empty_ = false;
    return y;
  }
  const Extended ext = extend(ctx, x, seqs);
  const Tensor y = op(ext.x, ext.seqs);
  keep_last_rows(ext.x, ext.seqs);  // every extended sequence has R rows at least
  return new_rows(ctx, y, ext);
}

InputHistory::Extended InputHistory::extend(StepContext& ctx, const Tensor& x, const SeqLayout& seqs) const {
  const int64_t S = seqs.num_seqs(), R = rows(), C = x.dim(1);
  Extended ext;
  ext.x = ctx.temporary({x.dim(0) + S * R, C});
  RowPairs from_history, from_x;
  for (int64_t s = 0; s < S; ++s) {
    const int64_t begin = seqs.begin(s) + s * R;  // sequence s of ext starts here
    for (int64_t j = 0; j < R; ++j) from_history.add(begin + j, s * R + j);
    for (int64_t t = seqs.begin(s); t < seqs.end(s); ++t) from_x.add(t + (s + 1) * R, t);
    ext.seqs.cu_seqlens.push_back(seqs.end(s) + (s + 1) * R);
  }
  from_history.copy(ext.x, history_.reshape({S * R, C}));
  from_x.copy(ext.x, x);
  return ext;
}

Tensor InputHistory::new_rows(StepContext& ctx, const Tensor& y, const Extended& ext) const {
  const int64_t S = ext.seqs.num_seqs(), R = rows();
  Tensor out = ctx.scratch.alloc({ext.x.dim(0) - S * R, y.dim(1)}, y.dtype());
  RowPairs pairs;
  for (int64_t s = 0; s < S; ++s) {
    for (int64_t t = ext.seqs.begin(s) + R; t < ext.seqs.end(s); ++t) pairs.add(t - (s + 1) * R, t);
  }
  pairs.copy(out, y);
  return out;
}

void InputHistory::keep_last_rows(const Tensor& x, const SeqLayout& seqs) {
  const int64_t S = seqs.num_seqs(), R = rows(), C = history_.dim(2);
  RowPairs pairs;
  for (int64_t s = 0; s < S; ++s) {
    for (int64_t j = 0; j < R; ++j) {
      const int64_t t = seqs.end(s) - R + j;  // before the start: the zero row stays
      if (t >= seqs.begin(s)) pairs.add(s * R + j, t);
    }
  }
  pairs.copy(history_.reshape({S * R, C}), x);
}

}  // namespace linea

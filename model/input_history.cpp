#include "model/input_history.h"

#include <stdexcept>
#include <string>

namespace linea {

InputHistory::InputHistory(int64_t sequences, int64_t rows, int64_t channels, DType dtype)
    : history_(Tensor::zeros({sequences, rows, channels}, dtype)) {}

InputHistory::Extended InputHistory::extend(StepContext& ctx, const Tensor& x, const SeqLayout& seqs) const {
  const int64_t S = seqs.num_seqs(), R = rows(), C = x.dim(1);
  if (history_.dim(0) != S || history_.dim(2) != C) {
    throw std::invalid_argument("InputHistory: a history of " + history_.describe() + " for " + std::to_string(S) +
                                " sequences of " + std::to_string(C) + " channels");
  }
  Extended ext;
  ext.x = ctx.temporary({x.dim(0) + S * R, C});
  for (int64_t s = 0; s < S; ++s) {
    const int64_t begin = seqs.begin(s) + s * R, length = seqs.end(s) - seqs.begin(s);
    ext.x.slice(begin, begin + R).copy_from(history_.slice(s, s + 1).reshape({R, C}));
    ext.x.slice(begin + R, begin + R + length).copy_from(x.slice(seqs.begin(s), seqs.end(s)));
    ext.seqs.cu_seqlens.push_back(begin + R + length);
  }
  return ext;
}

Tensor InputHistory::new_rows(StepContext& ctx, const Tensor& y, const Extended& ext) const {
  const int64_t S = ext.seqs.num_seqs(), R = rows();
  Tensor out = ctx.scratch.alloc({ext.x.dim(0) - S * R, y.dim(1)}, y.dtype());
  for (int64_t s = 0; s < S; ++s) {
    const int64_t begin = ext.seqs.begin(s) + R, end = ext.seqs.end(s);
    out.slice(begin - (s + 1) * R, end - (s + 1) * R).copy_from(y.slice(begin, end));
  }
  return out;
}

void InputHistory::update(const Extended& ext) {
  const int64_t R = rows(), C = history_.dim(2);
  for (int64_t s = 0; s < ext.seqs.num_seqs(); ++s) {
    history_.slice(s, s + 1).reshape({R, C}).copy_from(ext.x.slice(ext.seqs.end(s) - R, ext.seqs.end(s)));
  }
}

}  // namespace linea

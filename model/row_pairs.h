// RowPairs: the index pairs (to, from) of one ops::copy_rows call, gathered on the host by the
// decoding states that move rows (model/input_history.h, the attention layer's KV cache).
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/ops.h"

namespace linea {

class RowPairs {
 public:
  void add(int64_t to, int64_t from) {
    pairs_.push_back(static_cast<int32_t>(to));
    pairs_.push_back(static_cast<int32_t>(from));
  }
  // out[to] = in[from] for every pair added (out, in: [rows, C]).
  void copy(Tensor out, const Tensor& in) const {
    ops::copy_rows(
        out, in,
        Tensor::view(const_cast<int32_t*>(pairs_.data()), {static_cast<int64_t>(pairs_.size() / 2), 2}, DType::i32));
  }

 private:
  std::vector<int32_t> pairs_;
};

}  // namespace linea

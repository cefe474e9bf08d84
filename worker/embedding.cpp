#include "worker/embedding.h"

#include <stdexcept>

#include "kernels/ops.h"

namespace linea {

Embedding::Embedding(ParameterSet& params, const std::string& name, int64_t vocab, int64_t dim)
    : vocab_(vocab), dim_(dim) {
  table_ = params.declare(name + ".weight", {vocab, dim}, ParamRole::embedding, /*weight_decay=*/true);
}

void Embedding::init(Rng& rng, double std) { fill_normal(table_->value, rng, 0.0, std); }

Tensor Embedding::forward(StepContext& ctx, const Tensor& ids) {
  if (ids.dtype() != DType::i32 || ids.ndim() != 1) {
    throw std::invalid_argument("Embedding: token ids must be i32 [N], got " + ids.describe());
  }
  if (ids.device() == Device::cpu) {
    const int32_t* id = ids.data<int32_t>();
    for (int64_t n = 0; n < ids.numel(); ++n) {
      if (id[n] < 0 || id[n] >= vocab_) {
        throw std::invalid_argument("Embedding: token id " + std::to_string(id[n]) + " at position " +
                                    std::to_string(n) + " is outside the vocabulary [0, " + std::to_string(vocab_) +
                                    ")");
      }
    }
  }
  ids_ = ids;
  Tensor x = ctx.activation({ids.numel(), dim_});
  ops::embedding_forward(x, table_->value, ids);
  return x;
}

void Embedding::backward(const Tensor& dx) { ops::embedding_backward(table_->grad, dx, ids_); }

}  // namespace linea

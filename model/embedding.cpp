#include "model/embedding.h"

#include <stdexcept>

#include "kernels/ops.h"
#include "model/parameter_shard.h"

namespace linea {

Embedding::Embedding(ParameterSet& params, const std::string& name, int64_t vocab, int64_t dim,
                     const TensorParallel& tp)
    : vocab_(vocab), dim_(dim), tp_(tp) {
  table_ = params.declare(name + ".weight", {vocab, dim}, ParamRole::embedding, /*weight_decay=*/true, 0,
                          tp.split(vocab, "model.vocab"));
}

void Embedding::init(Rng& rng, double std) { init_normal(*table_, rng, std); }

Tensor Embedding::forward(StepContext& ctx, const Tensor& ids) {
  if (ids.dtype() != DType::i32 || ids.ndim() != 1) {
    throw std::invalid_argument("Embedding: token ids must be i32 [N], got " + ids.describe());
  }
  ids_ = ids;
  Tensor x = ctx.activation({ids.numel(), dim_});
  if (table_->shard_dim < 0) {
    ops::embedding_forward(x, table_->compute, ids);
  } else {
    ops::embedding_shard_forward(x, table_->compute, ids, table_->shard_offset, vocab_);
    tp_.all_reduce_sum(x);
  }
  return x;
}

void Embedding::backward(const Tensor& dx) {
  if (table_->shard_dim < 0) {
    ops::embedding_backward(table_->compute_grad, dx, ids_);
  } else {
    ops::embedding_shard_backward(table_->compute_grad, dx, ids_, table_->shard_offset, vocab_);
  }
}

}  // namespace linea

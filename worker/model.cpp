#include "worker/model.h"

#include <stdexcept>
#include <utility>

#include "kernels/ops.h"
#include "worker/lm_head_loss.h"
#include "worker/parameter_shard.h"

namespace linea {

namespace {
ModelConfig resolved(ModelConfig config) {
  config.resolve();
  return config;
}

TensorParallel validated(TensorParallel tp) {
  tp.validate();
  return tp;
}
}  // namespace

Model::Model(const ModelConfig& config, DType dtype, bool allocate, TensorParallel tp)
    : config_(resolved(config)),
      tp_(validated(tp)),
      params_(dtype),
      embedding_(params_, "embedding", config_.vocab, config_.d_model, tp_),
      norm_(params_, "norm", config_.d_model, config_.norm_eps) {
  if (dtype != DType::f32 && dtype != DType::f64) {
    throw std::invalid_argument("Model: parameters must be f32 or f64, got " + std::string(dtype_name(dtype)));
  }
  blocks_.reserve(static_cast<size_t>(config_.layers));
  block_params_.push_back(params_.params().size());
  for (int64_t i = 0; i < config_.layers; ++i) {
    blocks_.emplace_back(params_, "layers." + std::to_string(i), config_, i, tp_);
    block_params_.push_back(params_.params().size());
  }
  if (!config_.tie_embeddings) {
    head_ = params_.declare("head.weight", {config_.vocab, config_.d_model}, ParamRole::head, true, 0,
                            tp_.split(config_.vocab, "model.vocab"));
  }
  partial_grads_ = PartialGradientSum(params_);  // once every parameter is declared
  if (allocate) params_.finalize();
}

void Model::init_parameters(uint64_t seed) {
  if (!params_.finalized()) throw std::logic_error("Model::init_parameters: the model was built without memory");
  Rng rng(seed);
  const double std = config_.init_std;
  embedding_.init(rng, std);
  for (Block& block : blocks_) block.init(rng, std);
  norm_.init();
  if (head_) init_normal(*head_, rng, std);
}

const Parameter& Model::head() const { return head_ ? *head_ : embedding_.table(); }

Tensor Model::forward(StepContext& ctx, const Tensor& ids, const Tensor& targets, int64_t& target_count) {
  if (!params_.finalized()) throw std::logic_error("Model: the model was built without memory");
  const int64_t n = ctx.tokens();
  if (ids.dtype() != DType::i32 || ids.ndim() != 1 || ids.dim(0) != n) {
    throw std::invalid_argument("Model: ids must be i32 [" + std::to_string(n) + "] (the tokens of seqs), got " +
                                ids.describe());
  }
  if (targets.dtype() != DType::i32 || targets.ndim() != 1 || targets.dim(0) != n) {
    throw std::invalid_argument("Model: targets must be i32 [" + std::to_string(n) + "], got " + targets.describe());
  }
  target_count = 0;
  const int32_t* target = targets.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (target[i] < -1 || target[i] >= config_.vocab) {
      throw std::invalid_argument("Model: target " + std::to_string(target[i]) + " at position " + std::to_string(i) +
                                  " is neither -1 (ignored) nor in [0, " + std::to_string(config_.vocab) + ")");
    }
    target_count += target[i] >= 0;
  }
  Tensor x = embedding_.forward(ctx, ids);
  for (Block& block : blocks_) x = block.forward(ctx, x);
  return norm_.forward(ctx, x);
}

double Model::forward_backward(const Tensor& ids, const Tensor& targets, const SeqLayout& seqs, double loss_scale) {
  activations_.reset();
  scratch_.reset();
  StepContext ctx(activations_, scratch_, seqs, params_.dtype());
  int64_t count = 0;
  const Tensor hidden = forward(ctx, ids, targets, count);
  if (count == 0) return 0.0;

  partial_grads_.begin();
  Tensor dhidden = ctx.activation(hidden.shape());
  const double loss_sum =
      lm_head_loss(ctx, tp_, hidden, head(), targets, loss_scale / double(count), dhidden, head().grad);
  Tensor grad = ctx.activation(hidden.shape());
  Tensor next = ctx.activation(hidden.shape());
  norm_.backward(dhidden, grad);
  const bool report = gradients_ready_ && partial_grads_.numel() == 0;  // partial sums end with finish()
  const size_t params_end = params_.params().size();
  if (report && block_params_.back() < params_end) gradients_ready_(block_params_.back(), params_end);  // untied head
  for (size_t i = blocks_.size(); i-- > 0;) {
    blocks_[i].backward(ctx, grad, next);
    std::swap(grad, next);
    scratch_.reset();
    if (report) gradients_ready_(block_params_[i], block_params_[i + 1]);
  }
  embedding_.backward(grad);
  partial_grads_.finish(tp_);
  if (gradients_ready_) gradients_ready_(0, report ? block_params_.front() : params_end);
  return loss_sum / double(count);
}

double Model::evaluate(const Tensor& ids, const Tensor& targets, const SeqLayout& seqs) {
  activations_.reset();
  scratch_.reset();
  StepContext ctx(activations_, scratch_, seqs, params_.dtype());
  int64_t count = 0;
  const Tensor hidden = forward(ctx, ids, targets, count);
  if (count == 0) return 0.0;
  return lm_head_loss(ctx, tp_, hidden, head(), targets, 1.0, Tensor(), Tensor()) / double(count);
}

}  // namespace linea

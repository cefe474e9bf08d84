#include "model/model.h"

#include <stdexcept>
#include <utility>

#include "kernels/ops.h"
#include "model/lm_head_loss.h"
#include "model/parameter_shard.h"

namespace linea {

namespace {
ModelConfig resolved(ModelConfig config) {
  config.resolve();
  return config;
}

// Cross-layer routing runs on the CPU only so far.
ModelConfig routable_on(ModelConfig config, Device device) {
  if (config.routing.enabled() && device == Device::cuda) {
    throw std::invalid_argument(std::string("Model: model.routing.kind = \"") + routing_kind_name(config.routing.kind) +
                                "\": cross-layer routing is not yet on CUDA (it runs on the CPU only)");
  }
  return config;
}

TensorParallel validated(TensorParallel tp) {
  tp.validate();
  return tp;
}

// A host i32 [n] tensor of `what`, or a clear error.
void check_host_indices(const Tensor& t, int64_t n, const char* what) {
  if (t.dtype() != DType::i32 || t.ndim() != 1 || t.dim(0) != n || t.device() != Device::cpu) {
    throw std::invalid_argument(std::string("Model: ") + what + " must be i32 [" + std::to_string(n) +
                                "] on the cpu (the tokens of seqs), got " + t.describe());
  }
}

// t itself on the CPU; on CUDA a copy in the step's activations.
Tensor on_device(StepContext& ctx, const Tensor& t) {
  if (ctx.activations.device() == t.device()) return t;
  Tensor copy = ctx.activations.alloc(t.shape(), t.dtype());
  copy.copy_from(t);
  return copy;
}
}  // namespace

Model::Model(const ModelConfig& config, DType dtype, bool allocate, TensorParallel tp, Device device,
             std::optional<DType> compute_dtype)
    : config_(routable_on(resolved(config), device)),
      tp_(validated(tp)),
      params_(dtype, device, compute_dtype),
      embedding_(params_, "embedding", config_.vocab, config_.d_model, tp_),
      norm_(params_, "norm", config_.d_model, config_.norm_eps),
      activations_(device),
      scratch_(device) {
  if (dtype != DType::f32 && dtype != DType::f64) {
    throw std::invalid_argument("Model: parameters must be f32 or f64, got " + std::string(dtype_name(dtype)));
  }
  if (device == Device::cuda && dtype != DType::f32) {
    throw std::invalid_argument("Model: master weights on cuda must be f32, got " + std::string(dtype_name(dtype)));
  }
  const RoutingConfig& routing = config_.routing;
  routing_.resize(static_cast<size_t>(config_.layers));
  for (size_t i = 0; i < routing_.size(); ++i) {
    LayerRouting& r = routing_[i];
    r.kind = routing.kind;
    r.stop_grad = routing.stop_grad;
    r.always_project = routing.projection == "linear";
    const int64_t to = routing.sends_to.empty() ? -1 : routing.sends_to[i];
    r.sends = to >= 0;
    if (routing.kind == RoutingKind::cler && r.sends) {
      r.send = &links_.emplace_back();
      routing_[static_cast<size_t>(to)].receive = r.send;
    }
  }
  blocks_.reserve(static_cast<size_t>(config_.layers));
  block_params_.push_back(params_.params().size());
  for (int64_t i = 0; i < config_.layers; ++i) {
    blocks_.emplace_back(params_, "layers." + std::to_string(i), config_, i, tp_, &routing_[static_cast<size_t>(i)]);
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
  params_.with_host_values([&] {
    Rng rng(seed);
    const double std = config_.init_std;
    embedding_.init(rng, std);
    for (Block& block : blocks_) block.init(rng, std);
    norm_.init();
    if (head_) init_normal(*head_, rng, std);
  });
}

const Parameter& Model::head() const { return head_ ? *head_ : embedding_.table(); }

StepContext Model::begin_step(const SeqLayout& seqs) {
  if (!params_.finalized()) throw std::logic_error("Model: the model was built without memory");
  activations_.reset();
  scratch_.reset();
  return StepContext(activations_, scratch_, seqs, params_.compute_dtype(), params_.dtype());
}

Tensor Model::forward(StepContext& ctx, const Tensor& ids, const Tensor& targets, int64_t& target_count,
                      Tensor& device_targets) {
  const int64_t n = ctx.tokens();
  check_host_indices(ids, n, "ids");
  check_host_indices(targets, n, "targets");
  target_count = 0;
  const int32_t* id = ids.data<int32_t>();
  const int32_t* target = targets.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (id[i] < 0 || id[i] >= config_.vocab) {
      throw std::invalid_argument("Model: token id " + std::to_string(id[i]) + " at position " + std::to_string(i) +
                                  " is outside the vocabulary [0, " + std::to_string(config_.vocab) + ")");
    }
    if (target[i] < -1 || target[i] >= config_.vocab) {
      throw std::invalid_argument("Model: target " + std::to_string(target[i]) + " at position " + std::to_string(i) +
                                  " is neither -1 (ignored) nor in [0, " + std::to_string(config_.vocab) + ")");
    }
    target_count += target[i] >= 0;
  }
  device_targets = on_device(ctx, targets);
  Tensor x = embedding_.forward(ctx, on_device(ctx, ids));
  for (Block& block : blocks_) {
    x = block.forward(ctx, x);
    scratch_.reset();  // the block's temporaries (its backward recomputes what it needs of them)
  }
  return x;
}

double Model::forward_backward(const Tensor& ids, const Tensor& targets, const SeqLayout& seqs, double loss_scale) {
  StepContext ctx = begin_step(seqs);
  int64_t count = 0;
  Tensor device_targets;
  const Tensor residual = forward(ctx, ids, targets, count, device_targets);
  if (count == 0) return 0.0;
  const Tensor hidden = norm_.forward(ctx, residual);

  partial_grads_.begin();
  Tensor dhidden = ctx.activation(hidden.shape());
  const double loss_sum =
      lm_head_loss(ctx, tp_, hidden, head(), device_targets, loss_scale / double(count), dhidden, head().compute_grad);
  Tensor grad = ctx.activation(hidden.shape());
  Tensor next = ctx.activation(hidden.shape());
  norm_.backward(residual, dhidden, grad);
  // Parameters [first, end) have their whole gradient of this micro-batch: it goes into the f32
  // gradients (mixed precision), then the hook hears of it. Partial TP sums end with finish().
  const bool per_block = partial_grads_.numel() == 0;
  const auto finished = [&](size_t first, size_t end) {
    params_.accumulate_compute_grads(first, end);
    if (gradients_ready_) gradients_ready_(first, end);
  };
  const size_t params_end = params_.params().size();
  if (per_block && block_params_.back() < params_end) finished(block_params_.back(), params_end);  // untied head
  for (size_t i = blocks_.size(); i-- > 0;) {
    blocks_[i].backward(ctx, grad, next);
    std::swap(grad, next);
    scratch_.reset();
    if (per_block) finished(block_params_[i], block_params_[i + 1]);
  }
  embedding_.backward(grad);
  partial_grads_.finish(tp_);
  finished(0, per_block ? block_params_.front() : params_end);
  return loss_sum / double(count);
}

double Model::evaluate(const Tensor& ids, const Tensor& targets, const SeqLayout& seqs) {
  StepContext ctx = begin_step(seqs);
  int64_t count = 0;
  Tensor device_targets;
  const Tensor residual = forward(ctx, ids, targets, count, device_targets);
  if (count == 0) return 0.0;
  return lm_head_loss(ctx, tp_, norm_.forward(ctx, residual), head(), device_targets, 1.0, Tensor(), Tensor()) /
         double(count);
}

}  // namespace linea

#include "model/model.h"

#include <stdexcept>
#include <utility>
#include <vector>

#include "kernels/ops.h"
#include "model/lm_head_loss.h"
#include "model/parameter_shard.h"

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
    : config_(resolved(config)),
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

Tensor Model::checked_ids(StepContext& ctx, const Tensor& ids) const {
  const int64_t n = ctx.tokens();
  check_host_indices(ids, n, "ids");
  const int32_t* id = ids.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (id[i] < 0 || id[i] >= config_.vocab) {
      throw std::invalid_argument("Model: token id " + std::to_string(id[i]) + " at position " + std::to_string(i) +
                                  " is outside the vocabulary [0, " + std::to_string(config_.vocab) + ")");
    }
  }
  return on_device(ctx, ids);
}

Tensor Model::forward(StepContext& ctx, const Tensor& ids, const Tensor& targets, int64_t& target_count,
                      Tensor& device_targets) {
  const int64_t n = ctx.tokens();
  const Tensor device_ids = checked_ids(ctx, ids);
  check_host_indices(targets, n, "targets");
  target_count = 0;
  const int32_t* target = targets.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (target[i] < -1 || target[i] >= config_.vocab) {
      throw std::invalid_argument("Model: target " + std::to_string(target[i]) + " at position " + std::to_string(i) +
                                  " is neither -1 (ignored) nor in [0, " + std::to_string(config_.vocab) + ")");
    }
    target_count += target[i] >= 0;
  }
  device_targets = on_device(ctx, targets);
  // Each block's last residual add goes into the next block's attn_norm pass (Block::forward_deferred).
  Block::Output x{embedding_.forward(ctx, device_ids), Tensor()};
  for (Block& block : blocks_) {
    x = block.forward_deferred(ctx, x);
    scratch_.reset();  // the block's temporaries (its backward recomputes what it needs of them)
  }
  return Block::sum(x);
}

double Model::forward_backward(const Tensor& ids, const Tensor& targets, const SeqLayout& seqs, double loss_scale) {
  StepContext ctx = begin_step(seqs);
  ctx.backward_follows = true;
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

Tensor Model::head_logits(StepContext& ctx, const Tensor& residual, const std::vector<int64_t>& rows) {
  if (tp_.size > 1) throw std::invalid_argument("Model::logits: not available under tensor parallelism");
  const int64_t n = residual.dim(0), count = static_cast<int64_t>(rows.size());
  // The rows are gathered like an embedding lookup, picked[r, :] = residual[rows[r], :], and only
  // they are normed (the norm is row by row; a prefill asks for one row of each prompt).
  Tensor row_ids = Tensor::empty({count}, DType::i32);
  for (int64_t r = 0; r < count; ++r) {
    if (rows[r] < 0 || rows[r] >= n) {
      throw std::invalid_argument("Model::logits: row " + std::to_string(rows[r]) + " is outside the " +
                                  std::to_string(n) + " tokens");
    }
    row_ids.data<int32_t>()[r] = static_cast<int32_t>(rows[r]);
  }
  Tensor picked = ctx.temporary({count, config_.d_model});
  ops::embedding_forward(picked, residual, on_device(ctx, row_ids));
  Tensor logits = ctx.temporary({count, config_.vocab});
  ops::linear_forward(logits, norm_.forward(ctx, picked), head().compute, Tensor());
  // On the host, in the master dtype (f32, or f64 in tests).
  Tensor wide = logits;
  if (logits.dtype() != params_.dtype()) {
    wide = ctx.scratch.alloc(logits.shape(), params_.dtype());
    ops::convert(wide, logits);
  }
  Tensor host = Tensor::empty(wide.shape(), wide.dtype());
  host.copy_from(wide);
  return host;
}

Tensor Model::forward_only(StepContext& ctx, const Tensor& ids,
                           const std::function<Tensor(Block&, StepContext&, const Tensor&)>& run_block) {
  // The running residual stays where the embedding put it; each block's tensors are released once
  // its output is copied there, so a long prefill holds one block's activations at a time. CLER's
  // links carry a sender's write error to a later block: then every block's tensors stay.
  Tensor x = embedding_.forward(ctx, checked_ids(ctx, ids));
  const Arena::Mark before_blocks = activations_.mark();
  for (Block& block : blocks_) {
    x.copy_from(run_block(block, ctx, x));
    scratch_.reset();
    if (links_.empty()) activations_.release(before_blocks);
  }
  return x;
}

Tensor Model::logits(const Tensor& ids, const SeqLayout& seqs, const std::vector<int64_t>& rows) {
  StepContext ctx = begin_step(seqs);
  const Tensor x =
      forward_only(ctx, ids, [](Block& block, StepContext& c, const Tensor& in) { return block.forward(c, in); });
  return head_logits(ctx, x, rows);
}

void Model::with_separate_arenas(const std::function<void()>& fn) {
  Arena activations(device()), scratch(device());
  std::swap(activations_, activations);
  std::swap(scratch_, scratch);
  struct Restore {
    Model& model;
    Arena &activations, &scratch;
    ~Restore() {
      std::swap(model.activations_, activations);
      std::swap(model.scratch_, scratch);
    }
  } restore{*this, activations, scratch};
  fn();
}

size_t Model::DecodingState::bytes() const {
  size_t total = 0;
  for (const auto& layer : layers) total += layer->bytes();
  return total;
}

Model::DecodingState Model::start_decoding(int64_t sequences) const {
  DecodingState state;
  for (const Block& block : blocks_) state.layers.push_back(block.start_state(sequences));
  state.seen.assign(static_cast<size_t>(sequences), 0);
  return state;
}

Tensor Model::logits_continuing(const Tensor& ids, const SeqLayout& seqs, DecodingState& state,
                                const std::vector<int64_t>& rows) {
  if (tp_.size > 1) throw std::invalid_argument("Model: decoding is not available under tensor parallelism");
  if (state.layers.size() != blocks_.size() || static_cast<int64_t>(state.seen.size()) != seqs.num_seqs()) {
    throw std::invalid_argument("Model::logits_continuing: a state of " + std::to_string(state.layers.size()) +
                                " layers and " + std::to_string(state.seen.size()) + " sequences for " +
                                std::to_string(blocks_.size()) + " layers and " + std::to_string(seqs.num_seqs()));
  }
  StepContext ctx = begin_step(seqs);
  // Positions in the whole sequences: the tokens seen before plus the offset in this call.
  std::vector<int32_t> position(static_cast<size_t>(seqs.num_tokens()));
  for (int64_t s = 0; s < seqs.num_seqs(); ++s) {
    for (int64_t t = seqs.begin(s); t < seqs.end(s); ++t) {
      position[static_cast<size_t>(t)] = static_cast<int32_t>(state.seen[s] + t - seqs.begin(s));
    }
    state.seen[s] += seqs.end(s) - seqs.begin(s);
  }
  ctx.positions.copy_from(Tensor::view(position.data(), {seqs.num_tokens()}, DType::i32));
  size_t layer = 0;
  const Tensor x = forward_only(ctx, ids, [&](Block& block, StepContext& c, const Tensor& in) {
    return block.forward_continuing(c, in, *state.layers[layer++]);
  });
  return head_logits(ctx, x, rows);
}

}  // namespace linea

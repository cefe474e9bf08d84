#include "worker/distributed_optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/optimizer_math.h"
#include "model/parameter_shard.h"
#include "parallel/host_collectives.h"
#include "worker/adamw.h"
#include "worker/optimizer.h"

namespace linea {

DistributedOptimizer::DistributedOptimizer(const OptimizerConfig& config, ParameterSet& params, Communicator& dp,
                                           bool zero, TensorParallel tp)
    : config_(config),
      params_(params),
      dp_(dp),
      zero_(zero),
      tp_(tp),
      plan_(params, dp.size(),
            [&](const Parameter& p) { return config.kind == OptimizerKind::muon && takes_muon(p); }) {
  validate(config_);
  tp_.validate();
  if (!params.finalized()) throw std::invalid_argument("DistributedOptimizer: the ParameterSet is not finalized");
  if (params.dtype() != DType::f32 && params.dtype() != DType::f64) {
    throw std::invalid_argument("DistributedOptimizer: master weights must be f32 or f64, got " +
                                std::string(dtype_name(params.dtype())));
  }
  const Device device = params.values().device();
  if (dp.device() != device) {
    throw std::invalid_argument("DistributedOptimizer: the parameters are on " + std::string(device_name(device)) +
                                " but the DP communicator '" + dp.name() + "' works on " +
                                std::string(device_name(dp.device())) + "; expected the same device");
  }
  if (tp_.size > 1 && tp_.comm->device() != device) {
    throw std::invalid_argument("DistributedOptimizer: the parameters are on " + std::string(device_name(device)) +
                                " but the TP communicator '" + tp_.comm->name() + "' works on " +
                                std::string(device_name(tp_.comm->device())) + "; expected the same device");
  }
  if (device == Device::cuda && params.dtype() != DType::f32) {
    throw std::invalid_argument("DistributedOptimizer: master weights on a GPU must be f32, got " +
                                std::string(dtype_name(params.dtype())));
  }
  for (const Parameter& p : params.params()) {
    if (config_.kind == OptimizerKind::muon && takes_muon(p) && p.shape.size() != 2) {
      throw std::invalid_argument("Muon: parameter '" + p.name + "' has role matrix but shape " +
                                  shape_string(p.shape) + "; expected 2-D");
    }
  }
  const int me = dp.rank(), ranks = dp.size();
  if (!zero_ && ranks > 1) reducer_ = std::make_unique<DataParallelReducer>(dp, params);

  // The pieces whose state this rank keeps: its own, and under zero = false every AdamW piece.
  int64_t state_numel = 0;
  for (int r = 0; r < ranks; ++r) {
    for (const ShardPiece& piece : plan_.pieces(r)) {
      Held h;
      h.piece = piece;
      h.owned = r == me;
      h.muon = piece.whole;
      if (!h.owned && (h.muon || zero_)) continue;
      state_numel += h.muon ? piece.numel : 2 * piece.numel;
      held_.push_back(std::move(h));
    }
  }
  state_ = Tensor::zeros({state_numel}, params.dtype(), device);
  int64_t at = 0;
  const auto take = [&](int64_t n) {
    Tensor t = state_.slice(at, at + n);
    at += n;
    return t;
  };
  int64_t staging_numel = 0, full_numel = 0;
  for (Held& h : held_) {
    if (h.muon) {
      h.momentum = take(h.piece.numel);
      const Parameter& p = params.params()[h.piece.param];
      if (p.shard_dim >= 0 && tp_.size > 1) {  // collective over TP: its ranks hold the same pieces
        h.tp_ranges = shard_ranges(p, *tp_.comm);
        staging_numel = std::max(staging_numel, gather_staging_numel(p, h.tp_ranges));
        full_numel = std::max(full_numel, shape_numel(p.full_shape));
      }
    } else {
      h.m = take(h.piece.numel);
      h.v = take(h.piece.numel);
    }
  }

  if (full_numel > 0) {
    tp_staging_ = Tensor::zeros({staging_numel}, params.dtype(), device);
    tp_full_ = Tensor::empty({full_numel}, params.dtype(), device);
  }

  if (ranks > 1) {
    const int64_t chunk = zero_ ? plan_.chunk_numel() : plan_.whole_chunk_numel();
    if (chunk > 0) chunks_ = Tensor::zeros({ranks * chunk}, params.dtype(), device);
    if (sharded_gradients() && plan_.chunk_numel() > 0)
      received_ = Tensor::zeros({plan_.chunk_numel()}, params.dtype(), device);
  }
}

Tensor DistributedOptimizer::piece_view(const Tensor& flat, const ShardPiece& piece) const {
  return flat.slice(piece.offset, piece.offset + piece.numel);
}

Tensor DistributedOptimizer::gradient(const ShardPiece& piece) const {
  if (!sharded_gradients()) return piece_view(params_.grads(), piece);
  return received_.slice(piece.chunk_offset, piece.chunk_offset + piece.numel);
}

void DistributedOptimizer::copy_pieces(PieceCopy direction, const Tensor& flat, int rank, const Tensor& chunks,
                                       int64_t chunk_numel, bool whole_only) const {
  const auto& pieces = plan_.pieces(rank);
  const Tensor chunk = chunks.slice(rank * chunk_numel, (rank + 1) * chunk_numel);
#pragma omp parallel for schedule(dynamic) if (flat.device() == Device::cpu)
  for (size_t i = 0; i < pieces.size(); ++i) {
    const ShardPiece& piece = pieces[i];
    if (whole_only && !piece.whole) continue;
    Tensor in_chunk = chunk.slice(piece.chunk_offset, piece.chunk_offset + piece.numel);
    Tensor in_flat = piece_view(flat, piece);
    if (direction == PieceCopy::pack) {
      in_chunk.copy_from(in_flat);
    } else {
      in_flat.copy_from(in_chunk);
    }
  }
}

double DistributedOptimizer::reduce_gradients() {
  const int me = dp_.rank(), ranks = dp_.size();
  if (ranks > 1) {
    if (sharded_gradients()) {
      if (plan_.chunk_numel() > 0) {
        for (int r = 0; r < ranks; ++r) {
          copy_pieces(PieceCopy::pack, params_.grads(), r, chunks_, plan_.chunk_numel(), false);
        }
        dp_.reduce_scatter(chunks_, received_, ReduceOp::avg);
      }
    } else {
      reducer_->reduce(params_);
    }
  }

  // ‖g‖² = Σ_r (in rank order) Σ_{pieces of r} (in plan order) Σ g², the same in every mode; kept
  // apart for TP shards (then summed over the TP group) and for replicated parameters.
  const auto sums_of = [&](int rank, double* sums) {  // sums: [shards, replicated]
    sums[0] = sums[1] = 0;
    const std::vector<ShardPiece>& pieces = plan_.pieces(rank);
    std::vector<Tensor> grads;
    for (const ShardPiece& piece : pieces) grads.push_back(gradient(piece));
    const std::vector<double> each = ops::sums_of_squares(grads);  // one synchronisation on a GPU
    for (size_t i = 0; i < pieces.size(); ++i) sums[params_.params()[pieces[i].param].shard_dim < 0 ? 1 : 0] += each[i];
  };
  Tensor totals = Tensor::zeros({2}, DType::f64);
  double* total = totals.data<double>();
  if (sharded_gradients()) {
    Tensor mine = Tensor::empty({2}, DType::f64);
    sums_of(me, mine.data<double>());
    Tensor all = Tensor::empty({2 * ranks}, DType::f64);
    all_gather_host(dp_, mine, all);
    for (int r = 0; r < ranks; ++r) {
      total[0] += all.data<double>()[2 * r];
      total[1] += all.data<double>()[2 * r + 1];
    }
  } else {
    for (int r = 0; r < ranks; ++r) {
      double sums[2];
      sums_of(r, sums);
      total[0] += sums[0];
      total[1] += sums[1];
    }
  }
  if (tp_.size > 1) all_reduce_host(*tp_.comm, totals.slice(0, 1), ReduceOp::sum);
  const double norm = std::sqrt(total[0] + total[1]);

  const double max_norm = config_.grad_clip;
  grad_scale_ = max_norm > 0 && std::isfinite(norm) && norm > max_norm ? max_norm / (norm + 1e-6) : 1.0;
  return norm;
}

void DistributedOptimizer::overlap_next_backward() {
  if (reducer_) reducer_->overlap_next_backward();
}

void DistributedOptimizer::gradients_ready(size_t first_param, size_t end_param) {
  if (reducer_) reducer_->gradients_ready(first_param, end_param);
}

void DistributedOptimizer::update_matrix(Held& h, double lr) {
  const Parameter& p = params_.params()[h.piece.param];
  const Tensor u = scratch_.input(p.shape[0], p.shape[1], params_.dtype(), params_.values().device());
  ops::nesterov_momentum(h.momentum, u, gradient(h.piece), config_.muon_momentum, grad_scale_);
  if (!h.tp_ranges.empty()) {
    // A shard: orthogonalise the whole matrix, gathered over TP, and keep this rank's slice.
    const Tensor full = tp_full_.slice(0, shape_numel(p.full_shape)).reshape(p.full_shape);
    gather_full_into(p, u, *tp_.comm, h.tp_ranges, tp_staging_, full);
    scratch_.orthogonalise(full, config_.ns_steps);
    copy_from_full(full, p.shard_dim, {p.shard_offset, p.shape[static_cast<size_t>(p.shard_dim)]}, u);
  } else {
    scratch_.orthogonalise(u, config_.ns_steps);
  }
  const double decay_factor = takes_weight_decay(p, config_) ? 1 - lr * config_.weight_decay : 1.0;
  muon_apply(piece_view(params_.values(), h.piece), u, lr, decay_factor, p.full_shape[0], p.full_shape[1]);
}

void DistributedOptimizer::step(double lr) {
  check_learning_rate(lr);
  const int64_t t = step_ + 1;
  for (Held& h : held_) {
    if (h.muon) {
      update_matrix(h, lr);
    } else {
      const Parameter& p = params_.params()[h.piece.param];
      AdamWCoefficients c = adamw_coefficients(config_, lr, t, takes_weight_decay(p, config_));
      c.grad_scale = grad_scale_;
      ops::adamw_update(piece_view(params_.values(), h.piece), gradient(h.piece), h.m, h.v, c);
    }
  }
  grad_scale_ = 1;

  // Every replica takes the pieces the other ranks updated.
  const int me = dp_.rank(), ranks = dp_.size();
  const int64_t chunk = zero_ ? plan_.chunk_numel() : plan_.whole_chunk_numel();
  if (ranks > 1 && chunk > 0) {
    const bool whole_only = !zero_;
    copy_pieces(PieceCopy::pack, params_.values(), me, chunks_, chunk, whole_only);
    dp_.all_gather(chunks_.slice(me * chunk, (me + 1) * chunk), chunks_.slice(0, ranks * chunk));
    for (int r = 0; r < ranks; ++r) {
      if (r != me) copy_pieces(PieceCopy::unpack, params_.values(), r, chunks_, chunk, whole_only);
    }
  }
  ++step_;
}

CheckpointTensor DistributedOptimizer::block_of(const std::string& name, const Tensor& data,
                                                const ShardPiece& piece) const {
  const Parameter& p = params_.params()[piece.param];
  Shape shape = p.shape;
  std::vector<int64_t> offset(p.shape.size(), 0);
  if (!shape.empty()) {
    shape[0] = piece.row_end - piece.row_begin;
    offset[0] = piece.row_begin;
  }
  if (p.shard_dim >= 0) offset[static_cast<size_t>(p.shard_dim)] += p.shard_offset;  // a TP shard
  return CheckpointTensor(name, data.reshape(shape), p.full_shape, offset);
}

bool DistributedOptimizer::written_here(const ShardPiece& piece) const {
  return tp_.rank == 0 || params_.params()[piece.param].shard_dim >= 0;
}

std::vector<CheckpointTensor> DistributedOptimizer::state_blocks(bool owned_only) const {
  std::vector<CheckpointTensor> out;
  for (const Held& h : held_) {
    if (owned_only && (!h.owned || !written_here(h.piece))) continue;
    const std::string& name = params_.params()[h.piece.param].name;
    if (h.muon) {
      out.push_back(block_of("muon.momentum/" + name, h.momentum, h.piece));
    } else {
      out.push_back(block_of("adamw.m/" + name, h.m, h.piece));
      out.push_back(block_of("adamw.v/" + name, h.v, h.piece));
    }
  }
  return out;
}

std::vector<CheckpointTensor> DistributedOptimizer::owned_weights() const {
  std::vector<CheckpointTensor> out;
  for (const ShardPiece& piece : plan_.pieces(dp_.rank())) {
    if (!written_here(piece)) continue;
    out.push_back(block_of(params_.params()[piece.param].name, piece_view(params_.values(), piece), piece));
  }
  return out;
}

std::vector<CheckpointTensor> DistributedOptimizer::held_weights() const {
  std::vector<CheckpointTensor> out;
  const auto& ps = params_.params();
  for (size_t i = 0; i < ps.size(); ++i) {
    const ShardPiece whole{i, 0, row_count(ps[i]), ps[i].offset, shape_numel(ps[i].shape), 0, true};
    out.push_back(block_of(ps[i].name, ps[i].value, whole));
  }
  return out;
}

void DistributedOptimizer::set_step_count(int64_t steps) {
  if (steps < 0)
    throw std::invalid_argument("DistributedOptimizer: step count must be >= 0, got " + std::to_string(steps));
  step_ = steps;
}

}  // namespace linea

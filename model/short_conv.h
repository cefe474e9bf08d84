// ShortConv: depthwise causal convolution over time (kernel W, optional bias) followed by SiLU, on
// x: [N, C], weight: [C, W] ~ N(0, init_std) (fla's ShortConvolution). It restarts at every
// document boundary of ctx.seqs. Saves nothing: forward's output is a temporary (ctx.scratch),
// cheap to recompute; backward takes x again, overwrites dx and accumulates dweight.
// Depthwise, so channels are independent: a tensor-parallel rank may hold channels `shard` of the
// full C (x then holds those channels too).
#pragma once
#include <optional>
#include <string>

#include "kernels/random.h"
#include "model/input_history.h"
#include "model/parameters.h"
#include "model/step_context.h"

namespace linea {

class ShortConv {
 public:
  // channels: the full count; shard: the channels this rank holds (all when unset); bias: a bias
  // per channel before the SiLU (Mamba-2's conv; fla's ShortConvolution has none).
  ShortConv(ParameterSet& params, const std::string& name, int64_t channels, int64_t kernel,
            std::optional<ShardRange> shard = std::nullopt, bool bias = false);
  // Marks the (replicated) filters as taking only this rank's part of their gradient under tensor
  // parallelism (Parameter::partial_grad): for a conv every rank runs whole on inputs it shares.
  void set_partial_grad(bool partial);

  void init(Rng& rng, double std);
  Tensor forward(StepContext& ctx, const Tensor& x);
  // x: the forward's input.
  void backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx);

  // Decoding: the inputs the conv looks back at (kernel − 1 of them) for `sequences` sequences,
  // and forward over new tokens of ctx.seqs continuing them (model/input_history.h).
  InputHistory start_history(int64_t sequences) const;
  Tensor forward_continuing(StepContext& ctx, const Tensor& x, InputHistory& history) const;

 private:
  int64_t channels_;  // held by this rank
  Parameter* weight_;
  Parameter* bias_ = nullptr;
};

}  // namespace linea

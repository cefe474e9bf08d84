// Block: one pre-norm decoder layer, x → h = x + mixer(attn_norm(x)) → out = h + mlp(mlp_norm(h)).
// The mixer is the one the model config names for the layer, built by its family (the mixer
// registry). Without an MLP (ModelConfig::mlp false) out = h. Parameters are named
// PREFIX.attn_norm, PREFIX.mixer.*, PREFIX.mlp_norm, PREFIX.mlp.*.
// Memory: forward keeps views of x and h (both kept in ctx.activations anyway: x by the caller, h
// as the mixer's output) and what the mixer and MLP keep; the two norms' outputs are temporaries
// in ctx.scratch (the caller may reset it after forward), recomputed by backward.
// Under tensor parallelism x, h and out are whole on every rank; the mixer and the MLP each give
// this rank's term of their output, summed over the group in forward, and likewise the gradient of
// their input in backward (Megatron's g and f: two all-reduces of [N, D] each way per block).
// Cross-layer routing (model/routing.h) lives in the mixer: `routing` (null: none) is handed to it;
// CLER-H's and CLVR's terms are part of the mixer's output, CLER's link part of its value target.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "model/mixer.h"
#include "model/model_config.h"
#include "model/rms_norm.h"
#include "model/routing.h"
#include "model/swiglu_mlp.h"
#include "model/tensor_parallel.h"

namespace linea {

class Block {
 public:
  Block(ParameterSet& params, const std::string& name, const ModelConfig& config, int64_t layer,
        const TensorParallel& tp = {}, const LayerRouting* routing = nullptr);

  void init(Rng& rng, double std);
  Tensor forward(StepContext& ctx, const Tensor& x);
  // The block's output as two terms, out = term + residual (residual undefined: out = term), so that
  // the last residual add can go into the next block's attn_norm pass (forward_deferred) instead of
  // a pass of its own. term is in ctx.activations and not read by this block's backward: the next
  // block writes the sum over it.
  struct Output {
    Tensor term, residual;
  };
  // forward on x = in.term + in.residual (formed in the attn_norm pass, written over in.term), with
  // the block's own last add left to the caller: the same bits as forward.
  Output forward_deferred(StepContext& ctx, const Output& in);
  // out = term + residual, in place over term.
  static Tensor sum(const Output& out);
  // dout = ∂L/∂out; dx (≠ dout) is overwritten with ∂L/∂x. Temporaries go to ctx.scratch, which
  // it resets between its MLP and mixer halves: the caller keeps nothing there.
  void backward(StepContext& ctx, const Tensor& dout, Tensor dx);
  // Decoding: forward with the mixer continuing `state` (Mixer::forward_continuing); no TP.
  std::unique_ptr<MixerState> start_state(int64_t sequences) const { return mixer_->start_state(sequences); }
  Tensor forward_continuing(StepContext& ctx, const Tensor& x, MixerState& state);

 private:
  TensorParallel tp_;
  RMSNorm attn_norm_;
  std::unique_ptr<Mixer> mixer_;
  std::optional<RMSNorm> mlp_norm_;
  std::optional<SwiGLUMLP> mlp_;
  // out = h + mlp(mlp_norm(h)) with h = x + mixer_out, the mixer's term summed over the group, as
  // {mlp's term, h} ({mixer's term, x} without an MLP).
  Output finish(StepContext& ctx, const Tensor& x, Tensor mixer_out);

  Tensor x_, h_;  // the block's input and the residual stream between mixer and MLP
};

}  // namespace linea

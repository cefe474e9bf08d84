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
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "model/mixer.h"
#include "model/model_config.h"
#include "model/rms_norm.h"
#include "model/swiglu_mlp.h"
#include "model/tensor_parallel.h"

namespace linea {

class Block {
 public:
  Block(ParameterSet& params, const std::string& name, const ModelConfig& config, int64_t layer,
        const TensorParallel& tp = {});

  void init(Rng& rng, double std);
  Tensor forward(StepContext& ctx, const Tensor& x);
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
  // out = h + mlp(mlp_norm(h)) with h = x + mixer_out, the mixer's term summed over the group.
  Tensor finish(StepContext& ctx, const Tensor& x, Tensor mixer_out);

  Tensor x_, h_;  // the block's input and the residual stream between mixer and MLP
};

}  // namespace linea

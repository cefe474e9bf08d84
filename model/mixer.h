// Mixer: the token-mixing half of a block (softmax attention or a delta-rule layer), x: [N, D] →
// y: [N, D]. forward keeps what backward needs in ctx.activations, except its input x: backward
// takes x again (Block recomputes it), overwrites dx with ∂L/∂x given dy = ∂L/∂y and accumulates
// its parameters' gradients.
//
// Decoding: a MixerState is what a layer carries from the tokens it has seen of each of S
// sequences to the next ones (a recurrent state, the last inputs of its short convs, a KV cache).
// forward_continuing runs x over ctx.seqs (S sequences) where sequence s continues sequence s of
// the state, and updates the state: its output equals the rows of one forward over the whole
// sequences. Nothing is kept for backward. Each family defines its state and this path in its
// folder (model/mixers/<family>/*_decode.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <utility>

#include "kernels/random.h"
#include "model/step_context.h"

namespace linea {

class MixerState {
 public:
  virtual ~MixerState() = default;
  // Bytes the state holds now (a KV cache grows with the tokens seen).
  virtual size_t bytes() const = 0;
};

class Mixer {
 public:
  virtual ~Mixer() = default;
  // fla's init: projection and conv weights N(0, std), biases 0, norms 1, gate parameters per layer.
  virtual void init(Rng& rng, double std) = 0;
  virtual Tensor forward(StepContext& ctx, const Tensor& x) = 0;
  virtual void backward(StepContext& ctx, const Tensor& x, const Tensor& dy, Tensor dx) = 0;

  // The empty state of `sequences` sequences, on the layer's device.
  virtual std::unique_ptr<MixerState> start_state(int64_t sequences) const = 0;
  // state: one made by this layer's start_state, for ctx.seqs.num_seqs() sequences.
  virtual Tensor forward_continuing(StepContext& ctx, const Tensor& x, MixerState& state) = 0;
};

// The state as the family's type T; throws std::logic_error if it is another layer's.
template <class T>
T& state_as(MixerState& state) {
  T* typed = dynamic_cast<T*>(&state);
  if (!typed) throw std::logic_error("forward_continuing: a state made by another kind of layer");
  return *typed;
}

// A mixer whose training forward and decoding path are one function, run(ctx, x, state): from
// empty states (state null: forward) or continuing a State made by its start_state
// (forward_continuing). State is complete wherever the layer's class is (its header includes
// State's): forward_continuing casts to it.
template <class State>
class RunMixer : public Mixer {
 public:
  Tensor forward(StepContext& ctx, const Tensor& x) final { return run(ctx, x, nullptr); }
  Tensor forward_continuing(StepContext& ctx, const Tensor& x, MixerState& state) final {
    return run(ctx, x, &state_as<State>(state));
  }

 private:
  virtual Tensor run(StepContext& ctx, const Tensor& x, State* state) = 0;
};

// A zero recurrent state of `shape` for a layer whose compute weights are like `weights`: on their
// device, f32 when they are bf16 (the CUDA ops keep states in f32), else their dtype (f32, or f64
// in tests).
inline Tensor zero_state(Shape shape, const Tensor& weights) {
  const DType dtype = weights.dtype() == DType::bf16 ? DType::f32 : weights.dtype();
  return Tensor::zeros(std::move(shape), dtype, weights.device());
}

// Whether every sequence of seqs has exactly one token (a decoding step, which takes the
// recurrent one-token update rather than the chunked forward of a prefill).
inline bool one_token_each(const SeqLayout& seqs) { return seqs.num_tokens() == seqs.num_seqs(); }

}  // namespace linea

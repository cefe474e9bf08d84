// The problem of the whole-Model step tests (gpu/test_gpu_model.cpp: the GPU against the CPU in
// f64; unit/test_model_step_conditioning.cpp: its conditioning for bf16 steps): tiny hybrids of
// width 64 with head sizes the CUDA kernels support (softmax attention at layer 1, head_dim 64),
// their master weights, and two micro-batches of packed documents.
//
// The masters: Model::init_parameters(7), then norm gains and biases (ParamRole::vector) uniform
// in [0.5, 1.5] and the routing parameters N(0, 0.5), so that every parameter carries gradient;
// except RWKV-6's lerp biases b_i (m_i = LoRA_i(x̄) + b_i), uniform in [−0.5, 0.5], and its decay
// bias, uniform in [−6, −1] (RWKV-6's own init range of the decay logits: per-token decays
// exp(−e^w) in [0.69, 0.998]). Drawn from [0.5, 1.5] these two make the RWKV-6 problem
// ill-conditioned, whatever computes it: m ≈ 1 makes x_i = (1 − m) x_t + m x_{t−1} a cancellation
// (all of x_i at a document's first token), and decays of 0.011 to 0.19 leave S_{t−1} ≈
// k_{t−1} v_{t−1}ᵀ, so that GroupNorm scales up o_t ≈ (r_t · k_{t−1}) v_{t−1} wherever r_t · k_{t−1}
// is small. Measured in f64 on the CPU (unit/test_model_step_conditioning.cpp's figure), bf16
// rounding of the masters alone then moved layer 0's gradients by err_ratio 2.1 (over init seeds
// 1–8: 0.78 to 5.8), and an f32 step by 2.2e-4. RWKV-6's bonus u and x_mu stay at their init, 0
// (fla's): with u ≠ 0 a document's first token reads o = (r · (u ⊙ k)) v, rank one, whose GroupNorm
// is steep where r · (u ⊙ k) is small (u ~ N(0, 0.3): up to err_ratio 1.07 over the same seeds).
#pragma once
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/ops.h"
#include "kernels/random.h"
#include "model/model.h"
#include "model/routing.h"
#include "tests/testing/model_inputs.h"

namespace linea::testing {

inline ModelConfig model_step_hybrid(const std::string& mixer) {
  const bool tied = mixer == "gdn";  // the tied table gets gradient from both ends
  return tiny_hybrid_config(mixer, tied, kGpuSizes);
}

// Draws the masters of `model` as above, rounds them to f32 in place and returns them (f32,
// [numel]), for another model of the same config to copy.
inline Tensor draw_model_step_masters(Model& model) {
  model.init_parameters(7);
  const auto ends_with = [](std::string_view name, std::string_view tail) {
    return name.size() >= tail.size() && name.substr(name.size() - tail.size()) == tail;
  };
  Rng rng(8);
  for (Parameter& p : model.params().params()) {
    if (p.name.find(".x_lora.") != std::string::npos && ends_with(p.name, ".1.bias")) {
      fill_uniform(p.value, rng, -0.5, 0.5);
    } else if (ends_with(p.name, ".w_proj.1.bias")) {
      fill_uniform(p.value, rng, -6, -1);
    } else if (p.role == ParamRole::vector) {
      fill_uniform(p.value, rng, 0.5, 1.5);
    }
    if (is_routing_parameter(p.name)) fill_normal(p.value, rng, 0, 0.5);
  }
  Tensor masters = Tensor::empty({model.params().numel()}, DType::f32);
  ops::convert(masters, model.params().values());
  ops::convert(model.params().values(), masters);
  return masters;
}

// Packed documents of 37, 63, 70 and 30 tokens with next-token targets (−1 at each document's
// end): the two micro-batches of a step.
inline std::array<PackedBatch, 2> model_step_batches(int64_t vocab) {
  const std::vector<int64_t> lengths = {37, 63, 70, 30};
  return {packed_batch(lengths, vocab, 9), packed_batch(lengths, vocab, 10)};
}

}  // namespace linea::testing

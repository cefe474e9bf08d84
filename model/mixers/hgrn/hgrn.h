// HGRN's gated elementwise recurrence (reference/mixers.md §1.7), one scalar state per channel:
//
//   h_t = exp(g_t) ⊙ h_{t−1} + x_t,     o_t = h_t
//
// with log decays g ≤ 0. The layer-level parts (the forget gate with its lower bound, (1 − α) ⊙
// SiLU(i), the output norm) live in the layer. Two implementations with identical results:
// `recurrent` (token by token, the readable reference) and `chunked` (chunks of 64 tokens scanned
// locally, then one carry per chunk: the GPU's algorithm). The state restarts at every sequence of
// `seqs`; h0 and ht hold one state per sequence.
//
// Layout (fla's, flattened over tokens): x, g, o: [N, D]; h0, ht: [S, D] (h0 may be undefined =
// zeros, ht undefined to skip). All f32 or all f64 on the CPU. On a CUDA device (the recurrent
// forward runs token by token, decoding's one-token step; everything else the chunked scan): x, o,
// d_o, dx bf16 or f32; g, dg and the states f32 (model/mixers/hgrn/cuda/hgrn.h). The recurrent
// forward may update a state in place: ht may be h0 itself.
#pragma once
#include "kernels/seq_layout.h"
#include "kernels/tensor.h"

namespace linea::ops {

enum class HgrnImpl { recurrent, chunked };

struct HgrnInputs {
  Tensor x, g;
  Tensor h0;  // optional
};

// Gradients of every input (overwritten); dh0 is written whenever it is defined.
struct HgrnGrads {
  Tensor dx, dg, dh0;
};

void hgrn_forward(HgrnImpl impl, const SeqLayout& seqs, const HgrnInputs& in, Tensor o, Tensor ht);
// Gradients of the loss L with ∂L/∂o = d_o and ∂L/∂ht = dht (dht may be undefined = zeros).
void hgrn_backward(HgrnImpl impl, const SeqLayout& seqs, const HgrnInputs& in, const Tensor& d_o, const Tensor& dht,
                   HgrnGrads& grads);

}  // namespace linea::ops

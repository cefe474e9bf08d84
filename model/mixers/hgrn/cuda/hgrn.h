// HGRN's elementwise scan (model/mixers/hgrn/hgrn.h) on CUDA: the chunked parallel scan of
// model/mixers/hgrn/cpu/hgrn_chunked.h (chunks of 64 tokens, never across a sequence). Called by
// ops::hgrn_forward / hgrn_backward after their argument checks, for tensors on a CUDA device.
// Dtypes: x, o, d_o and dx share one dtype, bf16 or f32; g, dg and the states h0, ht, dht, dh0
// are f32; arithmetic is f32. Gradients are overwritten. Default stream; results repeat bit for bit.
#pragma once
#include "model/mixers/hgrn/hgrn.h"

namespace linea::cuda {

void hgrn_forward(const SeqLayout& seqs, const ops::HgrnInputs& in, Tensor o, Tensor ht);
// The recurrent form (ops::HgrnImpl::recurrent's forward, hgrn_recurrent.cu): one thread per
// (sequence, channel) walks the sequence's tokens, h read once and written once; ht may be h0 itself.
void hgrn_recurrent_forward(const SeqLayout& seqs, const ops::HgrnInputs& in, Tensor o, Tensor ht);
void hgrn_backward(const SeqLayout& seqs, const ops::HgrnInputs& in, const Tensor& d_o, const Tensor& dht,
                   ops::HgrnGrads& grads);

}  // namespace linea::cuda

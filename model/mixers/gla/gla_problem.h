// `linea mixer` for the gated-linear-attention family (model/mixer_problem.h): one mixer's forward
// and backward on an HDF5 file in flash-linear-attention's layout, B = 1 with optional cu_seqlens
// or B sequences of T tokens, with the datasets of issue 16's table:
//   gla     q, k [B, T, H, K], v [B, T, H, V], g [B, T, H, K]
//   retnet  q, k, v (the decays are fixed per head)
//   hgrn2   q, g, v (the key is tied to g)
//   mamba2  q, k, v, g [B, T, H] (one log decay per head)
//   rwkv6   q, k, v, g [B, T, H, K], u [H, K]
// and optional h0, do, dht; it writes o, ht and the gradient d<name> of every input for the loss
// sum(o·do) + sum(ht·dht).
#pragma once
#include "model/mixer_problem.h"

namespace linea {

const MixerProblemFormat& gla_problem_format();

}  // namespace linea

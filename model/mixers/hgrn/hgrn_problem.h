// `linea mixer` for HGRN (model/mixer_problem.h): the elementwise recurrence h_t = exp(g_t) ⊙ h_{t−1}
// + x_t, o_t = h_t (model/mixers/hgrn/hgrn.h) forward and backward on an HDF5 file in
// flash-linear-attention's layout: x, g [B, T, D], optional cu_seqlens (B = 1), h0 [B, D] (or
// [S, D]), do, dht; it writes o, ht, dx, dg and dh0 for the loss sum(o·do) + sum(ht·dht).
#pragma once
#include "model/mixer_problem.h"

namespace linea {

const MixerProblemFormat& hgrn_problem_format();

}  // namespace linea

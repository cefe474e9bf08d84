// fla's "Mamba-style" initialisation of a decay gate's parameters (reference/mixers.md §1.0),
// shared by the delta rule (GDN, KDA, GDN-2) and Mamba-2:
//   A_log = log A, A ~ U(a_min, 16) (a draw of A = 0 is redrawn);
//   dt_bias = softplus⁻¹(dt) = dt + log(−expm1(−dt)), dt = exp(U(log dt_min, log dt_max)) ≥ dt_floor.
// Each draws the parameter's full logical tensor in order and keeps this rank's shard, so every
// tensor-parallel size gives the same values from the same rng state.
#pragma once
#include "kernels/random.h"
#include "model/parameters.h"

namespace linea {

void init_a_log(Parameter& A_log, Rng& rng, double a_min);
void init_dt_bias(Parameter& dt_bias, Rng& rng, double dt_min = 1e-3, double dt_max = 1e-1, double dt_floor = 1e-4);

}  // namespace linea

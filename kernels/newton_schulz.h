// Newton–Schulz orthogonalisation of Muon (reference/mixers.md §6.1) as an op: argument checks,
// then dispatch to the CPU (BLAS GEMMs, kernels/cpu/newton_schulz.h) or the GPU (cuBLASLt,
// kernels/cuda/newton_schulz.h).
//
// For G = U·S·Vᵀ (rows × cols) it returns ≈ U·S'·Vᵀ with every singular value of S' in about
// [0.7, 1.2] (those of G that are not below ~1e-3·‖G‖_F): on X = G / (‖G‖_F + 1e-7), transposed
// first when rows > cols so that the Gram matrix is the small one, it repeats `steps` times
//   A = X·Xᵀ,   B = b·A + c·A·A,   X ← a·X + B·X      with (a, b, c) = (3.4445, −4.7750, 2.0315),
// each step mapping every singular value x to a·x + b·x³ + c·x⁵, and transposes back.
#pragma once
#include <cstdint>

#include "kernels/tensor.h"

namespace linea::ops {

// Elements of scratch memory newton_schulz() needs for a rows × cols matrix.
int64_t newton_schulz_workspace_numel(int64_t rows, int64_t cols);

// g, out: [rows, cols], f32 or f64, same dtype (out may be g itself); workspace: same dtype, at
// least newton_schulz_workspace_numel() elements. On a GPU (all three on the current CUDA device)
// g and out are f32 and the workspace's dtype, f32 or bf16, is the precision of the GEMMs.
// Throws std::invalid_argument "newton_schulz: ARGUMENT: expected …, got …" on bad arguments.
void newton_schulz(const Tensor& g, Tensor out, int steps, Tensor workspace);

}  // namespace linea::ops

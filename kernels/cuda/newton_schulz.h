// Newton–Schulz orthogonalisation (kernels/newton_schulz.h) on the GPU, through cuBLASLt
// (kernels/cuda/gemm.h): what newton_schulz() runs for CUDA tensors.
//
// The iterate X and the Gram matrices A, B are kept in `precision`: bf16 (GEMMs on bf16 operands,
// accumulating in f32, every product rounded to bf16 — the usual Muon setting) or f32 (f32
// GEMMs without TF32, matching the CPU to f32 rounding). The norm ‖G‖_F is summed in f64 on the
// device and read there (no synchronisation). A tall G (rows > cols) is not transposed: the
// GEMMs take the transposed operands instead, X stored as Xᵀ:
//   A = Xᵀᵀ·Xᵀ = X·Xᵀ,   Yᵀ = a·Xᵀ + Xᵀ·Bᵀ.
#pragma once
#include <cstdint>

#include "kernels/dtype.h"

namespace linea::cuda {

// g, out: rows × cols f32 on the device (out may be g); workspace: at least
// newton_schulz_workspace_numel(rows, cols) elements of `precision` (f32 or bf16).
void newton_schulz(const float* g, float* out, int64_t rows, int64_t cols, int steps, DType precision, void* workspace);

}  // namespace linea::cuda

// Rotary position embedding, rotate-half convention (Llama / fla), in place on rows of
// heads · head_dim values. For token n at position p = positions[n], every head, pair
// i < head_dim/2:
//   θ = ±p · base^(−2i / head_dim)          (− when inverse; angles are computed in double)
//   (x_i, x_{i+head_dim/2}) ← (x_i cos θ − x_{i+head_dim/2} sin θ,  x_i sin θ + x_{i+head_dim/2} cos θ)
// The map is a rotation, so its backward is the inverse rotation applied to the gradient.
#pragma once
#include <cstdint>

namespace linea::cpu {

template <class T>
void rope_apply(T* x, const int32_t* positions, int64_t rows, int64_t heads, int64_t head_dim, double base,
                bool inverse);

}  // namespace linea::cpu

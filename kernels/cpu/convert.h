// Elementwise conversion between floating-point storage types (float, double, bf16):
//   out[i] = round_To(in[i])            (convert)
//   out[i] = round_To(out[i] + in[i])   (accumulate; the sum in double)
// over n contiguous elements. Rounding to bf16 is round-to-nearest-even from float (a double is
// first rounded to float), as linea::bf16.
#pragma once
#include <cstdint>

namespace linea::cpu {

template <class To, class From>
void convert(To* out, const From* in, int64_t n, bool accumulate);

}  // namespace linea::cpu

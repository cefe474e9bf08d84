#include "kernels/seq_layout.h"

#include <stdexcept>
#include <string>

namespace linea {

SeqLayout SeqLayout::uniform(int64_t batch, int64_t seq_len) {
  SeqLayout s;
  for (int64_t b = 1; b <= batch; ++b) s.cu_seqlens.push_back(b * seq_len);
  return s;
}

std::vector<int32_t> SeqLayout::positions() const {
  std::vector<int32_t> pos(static_cast<size_t>(num_tokens()));
  for (int64_t s = 0; s < num_seqs(); ++s) {
    for (int64_t t = begin(s); t < end(s); ++t) pos[t] = static_cast<int32_t>(t - begin(s));
  }
  return pos;
}

void SeqLayout::validate(int64_t n_tokens) const {
  if (cu_seqlens.empty() || cu_seqlens.front() != 0) {
    throw std::invalid_argument("cu_seqlens must start with 0");
  }
  for (size_t i = 1; i < cu_seqlens.size(); ++i) {
    if (cu_seqlens[i] < cu_seqlens[i - 1]) {
      throw std::invalid_argument("cu_seqlens must not decrease (entry " + std::to_string(i) + ")");
    }
  }
  if (cu_seqlens.back() != n_tokens) {
    throw std::invalid_argument("cu_seqlens ends at " + std::to_string(cu_seqlens.back()) + " but there are " +
                                std::to_string(n_tokens) + " tokens");
  }
}

}  // namespace linea

#include "data/token_batch.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace linea::data {

namespace {

// read(begin, out) copies the seq_len + 1 tokens of the window starting at `begin` to `out`.
template <class Read>
void pack(Read&& read, std::span<const int64_t> window_starts, int64_t seq_len, int32_t eos_id, TokenBatch& batch) {
  const auto rows = static_cast<int64_t>(window_starts.size());
  batch.batch_seqs = rows;
  batch.seq_len = seq_len;
  batch.inputs.resize(static_cast<size_t>(rows * seq_len));
  batch.targets.resize(static_cast<size_t>(rows * seq_len));
  batch.layout.cu_seqlens.assign(1, 0);
  std::vector<int32_t> window(static_cast<size_t>(seq_len + 1));
  for (int64_t b = 0; b < rows; ++b) {
    read(window_starts[b], window.data());
    int32_t* in = batch.inputs.data() + b * seq_len;
    std::copy(window.begin(), window.end() - 1, in);
    std::copy(window.begin() + 1, window.end(), batch.targets.data() + b * seq_len);
    if (b > 0) batch.layout.cu_seqlens.push_back(b * seq_len);
    for (int64_t t = 1; t < seq_len; ++t) {
      if (in[t] == eos_id) batch.layout.cu_seqlens.push_back(b * seq_len + t);
    }
  }
  batch.layout.cu_seqlens.push_back(rows * seq_len);
}

}  // namespace

void pack_windows(const TokenStream& stream, std::span<const int64_t> window_starts, int64_t seq_len, int32_t eos_id,
                  TokenBatch& batch) {
  pack([&](int64_t begin, int32_t* out) { stream.read(begin, seq_len + 1, out); }, window_starts, seq_len, eos_id,
       batch);
}

void pack_windows(std::span<const int32_t> tokens, std::span<const int64_t> window_starts, int64_t seq_len,
                  int32_t eos_id, TokenBatch& batch) {
  pack(
      [&](int64_t begin, int32_t* out) {
        if (begin < 0 || begin + seq_len + 1 > static_cast<int64_t>(tokens.size())) {
          throw std::out_of_range("pack_windows: window at " + std::to_string(begin) + " outside " +
                                  std::to_string(tokens.size()) + " tokens");
        }
        std::copy(tokens.begin() + begin, tokens.begin() + begin + seq_len + 1, out);
      },
      window_starts, seq_len, eos_id, batch);
}

}  // namespace linea::data

// The reverse pass of a token-by-token recurrence without keeping every state (the recurrent CPU
// references of the mixer families): the forward is run once keeping the state at the start of
// every segment of `segment` tokens, then the segments are walked from the last, each one's
// per-token states recomputed from its start. Memory: O((T / segment + segment) · |S|).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/chunk/cpu/blocks.h"

namespace linea::cpu {

// Calls back(t, S_{t−1}) for t = end − 1 down to begin, with S_{t−1} the state before token t:
// S_{begin−1} = S, and step(S, t) turns S_{t−1} into S_t.
template <class T, class Step, class Back>
void reverse_by_segments(Block<T> S, int64_t begin, int64_t end, int64_t segment, Step step, Back back) {
  std::vector<Block<T>> segment_start;  // the state entering each segment
  for (int64_t t = begin; t < end; ++t) {
    if ((t - begin) % segment == 0) segment_start.push_back(S);
    step(S, t);
  }
  for (int64_t n = static_cast<int64_t>(segment_start.size()) - 1; n >= 0; --n) {
    const int64_t first = begin + n * segment, last = std::min(first + segment, end);
    std::vector<Block<T>> state_before;  // S_{t−1} for t in [first, last)
    S = segment_start[static_cast<size_t>(n)];
    for (int64_t t = first; t < last; ++t) {
      state_before.push_back(S);
      step(S, t);
    }
    for (int64_t t = last - 1; t >= first; --t) back(t, state_before[static_cast<size_t>(t - first)]);
  }
}

}  // namespace linea::cpu

#include "data/byte_pair_merges.h"

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "data/index_permutation.h"

namespace linea::data {

size_t BytePairMerges::slot_of(uint64_t k) const {
  const size_t mask = slots_.size() - 1;
  size_t i = static_cast<size_t>(mix64(k)) & mask;
  while (slots_[i].key != kEmpty && slots_[i].key != k) i = (i + 1) & mask;
  return i;
}

void BytePairMerges::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(std::max<size_t>(64, old.size() * 2), Slot{});
  for (const Slot& s : old) {
    if (s.key != kEmpty) slots_[slot_of(s.key)] = s;
  }
}

void BytePairMerges::add(int32_t left, int32_t right, int32_t rank, int32_t merged) {
  if (left < 0 || right < 0 || rank < 0 || merged < 0) throw std::invalid_argument("BPE merge: negative id or rank");
  if (2 * (count_ + 1) > slots_.size()) grow();
  const uint64_t k = key(left, right);
  Slot& s = slots_[slot_of(k)];
  if (s.key == kEmpty) ++count_;
  s.key = k;
  s.merge = {rank, merged};
}

BytePairMerges::Merge BytePairMerges::find(int32_t left, int32_t right) const {
  if (slots_.empty()) return {};
  const Slot& s = slots_[slot_of(key(left, right))];
  return s.key == kEmpty ? Merge{} : s.merge;
}

// Symbols form a doubly linked list over their original positions; pair i is (symbol i, the next
// live symbol). The heap holds (rank, position) of candidate pairs; one whose rank no longer matches
// its position's current pair is stale and skipped. Merging never lowers a position, so equal
// ranks pop left to right.
void BytePairMerges::merge(std::vector<int32_t>& symbols) const {
  const size_t n = symbols.size();
  if (n < 2 || count_ == 0) return;
  struct Scratch {
    std::vector<uint32_t> next, prev;
    std::vector<Merge> pair;  // the merge of the pair at each position
    std::vector<uint64_t> heap;
  };
  thread_local Scratch s;
  constexpr uint32_t kNone = ~uint32_t{0};
  s.next.resize(n);
  s.prev.resize(n);
  s.pair.resize(n);
  s.heap.clear();
  const auto push = [&](size_t i) {
    s.heap.push_back((static_cast<uint64_t>(static_cast<uint32_t>(s.pair[i].rank)) << 32) | i);
    std::push_heap(s.heap.begin(), s.heap.end(), std::greater<>());
  };
  for (size_t i = 0; i < n; ++i) {
    s.next[i] = i + 1 < n ? static_cast<uint32_t>(i + 1) : kNone;
    s.prev[i] = i > 0 ? static_cast<uint32_t>(i - 1) : kNone;
    s.pair[i] = i + 1 < n ? find(symbols[i], symbols[i + 1]) : Merge{};
    if (s.pair[i].rank >= 0) s.heap.push_back((static_cast<uint64_t>(s.pair[i].rank) << 32) | i);
  }
  std::make_heap(s.heap.begin(), s.heap.end(), std::greater<>());
  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), std::greater<>());
    const uint64_t top = s.heap.back();
    s.heap.pop_back();
    const auto i = static_cast<uint32_t>(top & 0xFFFFFFFFu);
    const auto rank = static_cast<int32_t>(top >> 32);
    if (s.pair[i].rank != rank || s.next[i] == kNone) continue;  // stale
    const uint32_t j = s.next[i];
    symbols[i] = s.pair[i].merged;
    symbols[j] = -1;
    s.next[i] = s.next[j];
    if (s.next[j] != kNone) s.prev[s.next[j]] = i;
    s.pair[j] = Merge{};
    s.pair[i] = s.next[i] != kNone ? find(symbols[i], symbols[s.next[i]]) : Merge{};
    if (s.pair[i].rank >= 0) push(i);
    if (const uint32_t p = s.prev[i]; p != kNone) {
      s.pair[p] = find(symbols[p], symbols[i]);
      if (s.pair[p].rank >= 0) push(p);
    }
  }
  symbols.erase(std::remove(symbols.begin(), symbols.end(), -1), symbols.end());
}

}  // namespace linea::data

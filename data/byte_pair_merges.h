// BytePairMerges: the merge table of a BPE vocabulary and the merging of one piece's symbols.
// A merge maps an adjacent pair of symbols (left id, right id) to its rank and the merged id:
//   merges.txt / tokenizer.json: the pair on line r of the merge list has rank r;
//   tiktoken: every way a token splits into two tokens, ranked by the token's rank.
// merge(): repeatedly merges the adjacent pair of lowest rank (the leftmost of equal ranks: the
// order tiktoken and Hugging Face tokenizers both use) until no adjacent pair has a merge. It runs
// in O(n log n) for n symbols (a heap of candidate pairs, stale ones skipped), so that a whole
// document given as one piece is fine. The table is an open-addressing hash map; lookups are lock-
// free and merge() may run on many threads at once.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace linea::data {

class BytePairMerges {
 public:
  struct Merge {
    int32_t rank = -1;
    int32_t merged = -1;
  };
  // Adds (or, when the pair is already there, replaces: the last one wins, as in a Python dict or
  // Hugging Face's merge map) the merge of (left, right) into `merged` with `rank` ≥ 0.
  void add(int32_t left, int32_t right, int32_t rank, int32_t merged);
  // The merge of (left, right); rank −1 when there is none.
  Merge find(int32_t left, int32_t right) const;
  // Merges `symbols` (ids) in place.
  void merge(std::vector<int32_t>& symbols) const;
  size_t size() const { return count_; }

 private:
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  size_t slot_of(uint64_t key) const;
  void grow();

  std::vector<Slot> slots_;  // power-of-two size, at most half full
  size_t count_ = 0;
};

}  // namespace linea::data

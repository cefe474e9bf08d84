// The words of a tokenizer's vocabulary, which the synthetic recall tasks build their keys,
// haystacks and word lists from, so that every task is made of pieces the model has seen.
// A word is a vocabulary entry that decodes, alone, to 3–12 lower-case ASCII letters, optionally
// after one leading space (the space is dropped); duplicates keep the first id. Ascending by id.
#pragma once
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace linea::eval {

struct VocabularyWord {
  std::string text;
  int32_t id = 0;  // the entry it was decoded from
};

std::vector<VocabularyWord> vocabulary_words(const data::Tokenizer& tokenizer);

// Throws std::runtime_error naming `task` when fewer than `needed` words are available.
void require_words(const std::vector<VocabularyWord>& words, size_t needed, const std::string& task);

}  // namespace linea::eval

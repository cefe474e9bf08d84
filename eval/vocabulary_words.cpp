#include "eval/vocabulary_words.h"

#include <stdexcept>
#include <unordered_set>

namespace linea::eval {

std::vector<VocabularyWord> vocabulary_words(const data::Tokenizer& tokenizer) {
  std::vector<VocabularyWord> words;
  std::unordered_set<std::string> seen;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (id == tokenizer.eos_id()) continue;
    std::string text;
    try {
      const int32_t one[] = {id};
      text = tokenizer.decode(one);
    } catch (const std::exception&) {
      continue;  // an id the tokenizer does not decode alone (a control or byte-fallback piece)
    }
    if (!text.empty() && text[0] == ' ') text.erase(0, 1);
    if (text.size() < 3 || text.size() > 12) continue;
    bool letters = true;
    for (char c : text) letters = letters && c >= 'a' && c <= 'z';
    if (letters && seen.insert(text).second) words.push_back({text, id});
  }
  return words;
}

void require_words(const std::vector<VocabularyWord>& words, size_t needed, const std::string& task) {
  if (words.size() < needed) {
    throw std::runtime_error(task + ": the tokenizer's vocabulary has " + std::to_string(words.size()) +
                             " words (entries of 3-12 lower-case letters); this task needs at least " +
                             std::to_string(needed));
  }
}

}  // namespace linea::eval

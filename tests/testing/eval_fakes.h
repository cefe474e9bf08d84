// Stand-ins for the evaluation tests: a byte tokenizer (id = byte + 1, document token 0, so token
// counts are byte counts), a word tokenizer (the byte tokenizer plus `words` generated words, ids
// 257…, a run of lower-case letters that is one of them one token) and LanguageModels whose
// answers the tests know in advance:
//   ScriptedModel: score and generate by functions the test gives;
//   UniformModel: p = 1/V for every token (log-likelihood −n·ln V; greedy never; generates nothing).
#pragma once
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>

#include "data/tokenizer.h"
#include "inference/language_model.h"

namespace linea::testing {

class ByteTokenizer : public data::Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(int32_t(c) + 1);
    return ids;
  }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string text;
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab_size()) throw std::out_of_range("byte tokenizer: id " + std::to_string(id));
      if (id > 0) text += char(id - 1);
    }
    return text;
  }
  int32_t vocab_size() const override { return 257; }
  int32_t eos_id() const override { return 0; }
  std::string_view kind() const override { return "bytes"; }
};

class WordTokenizer : public ByteTokenizer {
 public:
  // Words of five letters consonant-vowel-consonant-vowel-consonant, a deterministic spread.
  explicit WordTokenizer(int words = 3000) {
    const std::string consonants = "bdfgklmnprstvz", vowels = "aeiou";
    for (int i = 0; int(words_.size()) < words; i += 7) {
      int k = i;
      std::string w;
      for (int pos = 0; pos < 5; ++pos) {
        const std::string& set = pos % 2 ? vowels : consonants;
        w += set[size_t(k) % set.size()];
        k /= int(set.size());
      }
      if (ids_.emplace(w, 257 + int32_t(words_.size())).second) words_.push_back(w);
    }
  }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < text.size();) {
      size_t end = i;
      while (end < text.size() && text[end] >= 'a' && text[end] <= 'z') ++end;
      const bool starts_word = end > i && (i == 0 || !std::isalpha(static_cast<unsigned char>(text[i - 1])));
      const bool ends_word = end == text.size() || !std::isalpha(static_cast<unsigned char>(text[end]));
      const auto it = starts_word && ends_word ? ids_.find(std::string(text.substr(i, end - i))) : ids_.end();
      if (it != ids_.end()) {
        ids.push_back(it->second);
        i = end;
      } else {
        ids.push_back(int32_t(static_cast<unsigned char>(text[i])) + 1);
        ++i;
      }
    }
    return ids;
  }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string text;
    for (int32_t id : ids) {
      const int32_t one[] = {id};
      text += id >= 257 && id < vocab_size() ? words_[size_t(id - 257)] : ByteTokenizer::decode(one);
    }
    return text;
  }
  int32_t vocab_size() const override { return 257 + int32_t(words_.size()); }
  std::string_view kind() const override { return "words"; }

 private:
  std::vector<std::string> words_;
  std::map<std::string, int32_t> ids_;
};

class ScriptedModel : public inference::LanguageModel {
 public:
  using Score = std::function<inference::ScoreResult(const inference::ScoreRequest&)>;
  using Generate = std::function<inference::TokenIds(const inference::GenerateRequest&)>;
  ScriptedModel(Score score, Generate generate, int64_t vocab = 257)
      : score_(std::move(score)), generate_(std::move(generate)), vocab_(vocab) {}
  std::vector<inference::ScoreResult> score(const std::vector<inference::ScoreRequest>& requests) override {
    std::vector<inference::ScoreResult> out;
    for (const auto& r : requests) out.push_back(score_(r));
    score_calls += int64_t(requests.size());
    return out;
  }
  std::vector<inference::TokenIds> generate(const std::vector<inference::GenerateRequest>& requests) override {
    std::vector<inference::TokenIds> out;
    for (const auto& r : requests) out.push_back(generate_(r));
    return out;
  }
  int64_t vocab_size() const override { return vocab_; }
  int64_t score_calls = 0;

 private:
  Score score_;
  Generate generate_;
  int64_t vocab_;
};

class UniformModel : public inference::LanguageModel {
 public:
  explicit UniformModel(int64_t vocab = 257) : vocab_(vocab) {}
  std::vector<inference::ScoreResult> score(const std::vector<inference::ScoreRequest>& requests) override {
    std::vector<inference::ScoreResult> out;
    for (const auto& r : requests) out.push_back({-double(r.continuation.size()) * std::log(double(vocab_)), false});
    return out;
  }
  std::vector<inference::TokenIds> generate(const std::vector<inference::GenerateRequest>& requests) override {
    return std::vector<inference::TokenIds>(requests.size());
  }
  int64_t vocab_size() const override { return vocab_; }

 private:
  int64_t vocab_;
};

}  // namespace linea::testing

#include "eval/ruler_tasks.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <stdexcept>

#include "data/synthetic_rng.h"
#include "eval/prompt_fitting.h"
#include "eval/ruler_qa_documents.h"

namespace linea::eval {
namespace {

using data::SyntheticRng;

struct Needle {
  std::string key;
  std::vector<std::string> values;
};

// The pieces a sample is drawn from, and the draws it needs.
class SampleMaker {
 public:
  SampleMaker(const std::vector<VocabularyWord>& words, SyntheticRng rng) : words_(words), rng_(rng) {}
  const std::string& word() { return words_[rng_.below(words_.size())].text; }
  std::string key() { return word() + "-" + word(); }
  std::string number(int digits) {
    std::string s(1, char('1' + rng_.below(9)));
    while (int(s.size()) < digits) s += char('0' + rng_.below(10));
    return s;
  }
  std::string uuid() {
    static const char* hex = "0123456789abcdef";
    std::string s;
    for (int group : {8, 4, 4, 4, 12}) {
      if (!s.empty()) s += '-';
      for (int i = 0; i < group; ++i) s += hex[rng_.below(16)];
    }
    return s;
  }
  std::string sentence() {  // the "essay" haystack: 6-14 words, capitalised, a full stop
    std::string s = word();
    s[0] = char(s[0] - 'a' + 'A');
    for (uint64_t i = 0, n = 5 + rng_.below(9); i < n; ++i) s += " " + word();
    return s + ".";
  }
  std::vector<std::string> distinct_words(size_t count) {
    std::vector<std::string> out;
    for (int64_t i : rng_.distinct(int64_t(words_.size()), int64_t(count))) out.push_back(words_[size_t(i)].text);
    return out;
  }
  SyntheticRng& rng() { return rng_; }

 private:
  const std::vector<VocabularyWord>& words_;
  SyntheticRng rng_;
};

// A haystack of n units with the needle sentences inserted at fixed fractions of its length.
std::string haystack_with(const std::vector<std::string>& units, int64_t n, const std::vector<std::string>& inserts,
                          const std::vector<double>& depths) {
  std::vector<std::pair<int64_t, size_t>> at;  // (position, insert)
  for (size_t i = 0; i < inserts.size(); ++i) at.push_back({int64_t(std::llround(depths[i] * double(n))), i});
  std::stable_sort(at.begin(), at.end());
  std::string text;
  size_t next = 0;
  for (int64_t u = 0; u <= n; ++u) {
    for (; next < at.size() && at[next].first == u; ++next)
      text += (text.empty() ? "" : " ") + inserts[at[next].second];
    if (u < n) text += (text.empty() ? "" : " ") + units[size_t(u) % units.size()];
  }
  return text;
}

const char* kNoise = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

struct NiahConfig {
  enum Haystack { noise, essay, needles } haystack;
  bool uuid_keys, uuid_values;
  int keys, values, queries;
};

const std::map<std::string, NiahConfig, std::less<>>& niah_configs() {
  static const std::map<std::string, NiahConfig, std::less<>> configs = {
      {"niah_single_1", {NiahConfig::noise, false, false, 1, 1, 1}},
      {"niah_single_2", {NiahConfig::essay, false, false, 1, 1, 1}},
      {"niah_single_3", {NiahConfig::essay, false, true, 1, 1, 1}},
      {"niah_multikey_1", {NiahConfig::essay, false, false, 4, 1, 1}},
      {"niah_multikey_2", {NiahConfig::needles, false, false, 1, 1, 1}},
      {"niah_multikey_3", {NiahConfig::needles, true, true, 1, 1, 1}},
      {"niah_multivalue", {NiahConfig::essay, false, false, 1, 4, 1}},
      {"niah_multiquery", {NiahConfig::essay, false, false, 4, 1, 4}},
  };
  return configs;
}

std::string join_list(const std::vector<std::string>& items) {  // "a", "a and b", "a, b, and c"
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) s += items.size() == 2 ? " and " : (i + 1 == items.size() ? ", and " : ", ");
    s += items[i];
  }
  return s;
}

RecallSample niah_sample(const NiahConfig& c, SampleMaker& m, const data::Tokenizer& tok, int64_t budget,
                         const std::string& task) {
  const std::string kind = c.uuid_values ? "uuids" : "numbers";
  auto value = [&] { return c.uuid_values ? m.uuid() : m.number(7); };
  auto key = [&] { return c.uuid_keys ? m.uuid() : m.key(); };
  auto needle_text = [&](const std::string& k, const std::string& v) {
    return "One of the special magic " + kind + " for " + k + " is: " + v + ".";
  };
  std::vector<Needle> needles(size_t(c.keys));
  for (Needle& n : needles) {
    n.key = key();
    for (int v = 0; v < c.values; ++v) n.values.push_back(value());
  }
  std::vector<std::string> inserts;
  std::vector<double> depths;
  for (const Needle& n : needles) {
    for (const std::string& v : n.values) {
      inserts.push_back(needle_text(n.key, v));
      depths.push_back(m.rng().unit());
    }
  }
  std::vector<std::string> units;
  if (c.haystack == NiahConfig::noise) units = {kNoise};
  for (int i = 0; i < 4096 && c.haystack != NiahConfig::noise; ++i) {
    units.push_back(c.haystack == NiahConfig::essay ? m.sentence() : needle_text(key(), value()));
  }
  std::vector<std::string> asked, references;
  for (int q = 0; q < c.queries; ++q) {
    asked.push_back(needles[size_t(q)].key);
    references.insert(references.end(), needles[size_t(q)].values.begin(), needles[size_t(q)].values.end());
  }
  const std::string query = join_list(asked);
  const std::string head =
      "Some special magic " + kind +
      " are hidden within the following text. Make sure to memorize it. I will quiz you about the " + kind +
      " afterwards.\n";
  const std::string tail = "\nWhat are all the special magic " + kind + " for " + query +
                           " mentioned in the provided text? The special magic " + kind + " for " + query +
                           " mentioned in the provided text are";
  const std::string prompt = fit_prompt(
      tok, budget, 0, budget, [&](int64_t n) { return head + haystack_with(units, n, inserts, depths) + tail; }, task);
  return {prompt, references, 128, StringMatch::all};
}

RecallSample vt_sample(SampleMaker& m, const data::Tokenizer& tok, int64_t budget) {
  const int hops = 4;
  std::vector<std::string> names;
  while (names.size() < size_t(hops + 1)) {
    std::string name;
    for (int i = 0; i < 5; ++i) name += char('A' + m.rng().below(26));
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  const std::string value = m.number(5);
  std::vector<std::string> inserts = {"VAR " + names[0] + " = " + value + "."};
  for (int h = 1; h <= hops; ++h) inserts.push_back("VAR " + names[size_t(h)] + " = VAR " + names[size_t(h - 1)] + ".");
  std::vector<double> depths;
  for (size_t i = 0; i < inserts.size(); ++i) depths.push_back(m.rng().unit());
  std::sort(depths.begin(), depths.end());  // the chain in order
  const std::string head = "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n";
  const std::string tail = "\nQuestion: Find all variables that are assigned the value " + value +
                           " in the text above. Answer: According to the chain(s) of variable assignment in the text "
                           "above, " +
                           std::to_string(hops + 1) + " variables are assigned the value " + value + ", they are: ";
  const std::string prompt = fit_prompt(
      tok, budget, 0, budget, [&](int64_t n) { return head + haystack_with({kNoise}, n, inserts, depths) + tail; },
      "vt");
  return {prompt, names, 30, StringMatch::all};
}

// RULER's counts (10 words 30 times, the others 3) fill 4K tokens on their own; below 4096 tokens
// linea lists the common words 6 times and the others once.
RecallSample cwe_sample(SampleMaker& m, const data::Tokenizer& tok, int64_t budget, size_t word_count,
                        int64_t context_length) {
  const int common = 10, common_freq = context_length < 4096 ? 6 : 30, uncommon_freq = context_length < 4096 ? 1 : 3;
  const std::vector<std::string> pool = m.distinct_words(word_count);  // the first 10 are the common ones
  const uint64_t order_seed = m.rng().next();
  auto build = [&](int64_t uncommon) {
    std::vector<std::string> list;
    for (int w = 0; w < common; ++w) list.insert(list.end(), common_freq, pool[size_t(w)]);
    for (int64_t w = 0; w < uncommon; ++w) list.insert(list.end(), uncommon_freq, pool[size_t(common + w)]);
    SyntheticRng shuffle(order_seed, 0);
    for (size_t i = list.size(); i > 1; --i) std::swap(list[i - 1], list[shuffle.below(i)]);
    std::string text =
        "Below is a numbered list of words. In these words, some appear more often than others. "
        "Memorize the ones that appear most often.\n";
    for (size_t i = 0; i < list.size(); ++i) text += (i ? " " : "") + std::to_string(i + 1) + ". " + list[i];
    return text +
           "\nQuestion: What are the 10 most common words in the above list? Answer: The top 10 words that "
           "appear most often in the list are:";
  };
  const int64_t most = int64_t(pool.size()) - common;
  const std::string prompt = fit_prompt(tok, budget, 0, most, build, "cwe");
  return {prompt, std::vector<std::string>(pool.begin(), pool.begin() + common), 120, StringMatch::all};
}

RecallSample fwe_sample(SampleMaker& m, const data::Tokenizer& tok, int64_t budget) {
  const int distinct = 30;
  const double alpha = 2.0;
  const std::vector<std::string> ranked = m.distinct_words(distinct);
  const uint64_t order_seed = m.rng().next();
  double harmonic = 0;  // Σ_r r^-α
  for (int r = 1; r <= distinct; ++r) harmonic += std::pow(double(r), -alpha);
  auto build = [&](int64_t total) {
    std::vector<std::string> list;  // word r exactly max(1, ⌊total · r^-α / H⌋) times
    for (int r = 1; r <= distinct; ++r) {
      const auto count = std::max<int64_t>(1, int64_t(double(total) * std::pow(double(r), -alpha) / harmonic));
      list.insert(list.end(), size_t(count), ranked[size_t(r - 1)]);
    }
    SyntheticRng shuffle(order_seed, 0);
    for (size_t i = list.size(); i > 1; --i) std::swap(list[i - 1], list[shuffle.below(i)]);
    std::string text =
        "Read the following coded text and track the frequency of each coded word. Find the three most "
        "frequently appeared coded words. ";
    for (size_t i = 0; i < list.size(); ++i) text += (i ? " .... " : "") + list[i];
    return text +
           "\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are the three most "
           "frequently appeared words in the above coded text? Answer: According to the coded text above, the "
           "three most frequently appeared words are:";
  };
  // At least 40 words: then the counts of the first four ranks differ (⌊40·0.62⌋ > ⌊40·0.15⌋ > ⌊40·0.07⌋ > ⌊40·0.04⌋).
  const std::string prompt = fit_prompt(tok, budget, 40, budget, build, "fwe");
  return {prompt, std::vector<std::string>(ranked.begin(), ranked.begin() + 3), 50, StringMatch::all};
}

const char* kQaHead =
    "Answer the question based on the given documents. Only give me the answer and do not output any "
    "other words.\n\nThe following are given documents.\n\n";

std::string qa_prompt(const std::vector<std::string>& documents, const std::string& question) {
  std::string text = kQaHead;
  for (size_t i = 0; i < documents.size(); ++i)
    text += "Document " + std::to_string(i + 1) + ":\n" + documents[i] + "\n\n";
  return text +
         "Answer the question based on the given documents. Only give me the answer and do not output any other "
         "words.\n\nQuestion: " +
         question + " Answer:";
}

// The gold documents at a random place among the first n distractors (distractor(i): the i-th).
RecallSample qa_sample(SampleMaker& m, const data::Tokenizer& tok, int64_t budget, const std::vector<std::string>& gold,
                       const std::function<std::string(int64_t)>& distractor, int64_t distractors,
                       const std::string& question, const std::vector<std::string>& answers, const std::string& task) {
  std::vector<double> depths;
  for (size_t i = 0; i < gold.size(); ++i) depths.push_back(m.rng().unit());
  auto build = [&](int64_t n) {
    std::vector<std::string> docs;
    for (int64_t i = 0; i < n; ++i) docs.push_back(distractor(i));
    for (size_t g = 0; g < gold.size(); ++g) {
      const auto at = std::min<size_t>(docs.size(), size_t(std::llround(depths[g] * double(n))));
      docs.insert(docs.begin() + int64_t(at), gold[g]);
    }
    return qa_prompt(docs, question);
  };
  return {fit_prompt(tok, budget, 0, distractors, build, task), answers, 32, StringMatch::part};
}

RecallSample qa_synthetic_sample(SampleMaker& m, const data::Tokenizer& tok, int64_t budget) {
  auto fact_document = [&](const std::string& entity, const std::string& attribute, const std::string& value) {
    return m.sentence() + " The " + attribute + " code of " + entity + " is " + value + ". " + m.sentence();
  };
  const std::string entity = m.key(), attribute = m.word(), value = m.number(7);
  const std::string gold = fact_document(entity, attribute, value);
  std::vector<std::string> distractors;
  for (int i = 0; i < 2048; ++i) distractors.push_back(fact_document(m.key(), m.word(), m.number(7)));
  return qa_sample(
      m, tok, budget, {gold}, [&](int64_t i) { return distractors[size_t(i)]; }, int64_t(distractors.size()),
      "What is the " + attribute + " code of " + entity + "?", {value}, "qa_synthetic");
}

}  // namespace

const std::vector<std::string>& ruler_task_names() {
  static const std::vector<std::string> names = {"niah_single_1",
                                                 "niah_single_2",
                                                 "niah_single_3",
                                                 "niah_multikey_1",
                                                 "niah_multikey_2",
                                                 "niah_multikey_3",
                                                 "niah_multivalue",
                                                 "niah_multiquery",
                                                 "vt",
                                                 "cwe",
                                                 "fwe",
                                                 "qa_1",
                                                 "qa_2",
                                                 "qa_synthetic"};
  return names;
}

bool is_ruler_task(std::string_view task) {
  const auto& names = ruler_task_names();
  return std::find(names.begin(), names.end(), task) != names.end();
}

std::vector<RecallSample> generate_ruler_samples(std::string_view task, const RulerSettings& s,
                                                 const data::Tokenizer& tokenizer,
                                                 const std::vector<VocabularyWord>& words) {
  const std::string name(task);
  if (!is_ruler_task(task)) throw std::invalid_argument("not a RULER task: " + name);
  QaSet qa;
  if (task == "qa_1" || task == "qa_2") qa = read_qa_set(task, s.data_dir);
  const size_t cwe_words = size_t(std::min<int64_t>(int64_t(words.size()), 10 + s.context_length / 4));
  require_words(words, task == "cwe" ? std::max<size_t>(cwe_words, 20) : task == "fwe" ? 30 : 16, name);
  // A stream per (task, length): the samples of one task do not change when another is added.
  uint64_t stream = std::hash<std::string>{}(name) ^ data::mix64(uint64_t(s.context_length));
  std::vector<RecallSample> samples;
  for (int64_t i = 0; i < s.samples; ++i) {
    SampleMaker m(words, data::SyntheticRng(s.seed, data::mix64(stream + uint64_t(i))));
    // The prompt's budget: the context length less what the task generates.
    auto budget_for = [&](int64_t max_tokens) { return s.context_length - max_tokens; };
    if (const auto it = niah_configs().find(task); it != niah_configs().end()) {
      samples.push_back(niah_sample(it->second, m, tokenizer, budget_for(128), name));
    } else if (task == "vt") {
      samples.push_back(vt_sample(m, tokenizer, budget_for(30)));
    } else if (task == "cwe") {
      samples.push_back(cwe_sample(m, tokenizer, budget_for(120), cwe_words, s.context_length));
    } else if (task == "fwe") {
      samples.push_back(fwe_sample(m, tokenizer, budget_for(50)));
    } else if (task == "qa_synthetic") {
      samples.push_back(qa_synthetic_sample(m, tokenizer, budget_for(32)));
    } else {
      const QaExample& ex = qa.examples[size_t(i) % qa.examples.size()];
      std::vector<std::string> gold;
      for (int64_t d : ex.gold_documents) gold.push_back(qa.documents[size_t(d)]);
      // Distractors: the other documents, from a random start on (a gold one met there is skipped).
      const uint64_t start = m.rng().below(qa.documents.size());
      auto distractor = [&](int64_t j) {
        size_t d = size_t((start + uint64_t(j)) % qa.documents.size());
        while (std::find(ex.gold_documents.begin(), ex.gold_documents.end(), int64_t(d)) != ex.gold_documents.end()) {
          d = (d + 1) % qa.documents.size();
        }
        return qa.documents[d];
      };
      const auto distractors = int64_t(qa.documents.size() - ex.gold_documents.size());
      samples.push_back(
          qa_sample(m, tokenizer, budget_for(32), gold, distractor, distractors, ex.question, ex.answers, name));
    }
  }
  return samples;
}

}  // namespace linea::eval

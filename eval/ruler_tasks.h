// RULER-style synthetic recall tasks (Hsieh et al. 2024, NVIDIA/RULER scripts/data/synthetic/),
// generated from the tokenizer's vocabulary words (vocabulary_words.h), deterministic in
// (seed, task, context length, sample index), each prompt fitted to context_length − max_tokens
// tokens (prompt_fitting.h). RULER's templates and configurations (synthetic.yaml):
//   niah_single_1    noise haystack, a word key, a 7-digit number
//   niah_single_2    "essay" haystack, word key, number
//   niah_single_3    essay haystack, word key, UUID
//   niah_multikey_1  essay haystack, 4 keys (one asked)
//   niah_multikey_2  a haystack of needles (distractor keys), number values
//   niah_multikey_3  a haystack of needles, UUID keys and values
//   niah_multivalue  essay haystack, one key with 4 values (all asked)
//   niah_multiquery  essay haystack, 4 keys, all asked
//   vt               variable tracking: a chain of 4 hops (5 variables) in a noise haystack
//   cwe              common words: 10 words 30 times each among words 3 times each (below 4096
//                    tokens 6 times among words once: RULER's counts alone fill 4K tokens)
//   fwe              frequent words: Zipf (α = 2) word counts, the top 3
//   qa_synthetic     documents stating facts "The <word> code of <key> is <number>."; one asked
//   qa_1, qa_2       RULER's QA over SQuAD v2 dev (DATA_DIR/squad.json) and HotpotQA dev distractor
//                    (DATA_DIR/hotpotqa.json): the gold paragraphs among distractors
// Keys are two vocabulary words joined by "-" (RULER's adjective-noun pairs); the "essay" haystack
// (Paul Graham's essays in RULER, not shipped here) is sentences of 6–14 random vocabulary words.
// Scoring: string_match_all for niah, vt, cwe, fwe; string_match_part for the QA tasks.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"
#include "eval/recall_sample.h"
#include "eval/vocabulary_words.h"

namespace linea::eval {

// Every RULER task name above, in RULER's order.
const std::vector<std::string>& ruler_task_names();
bool is_ruler_task(std::string_view task);

struct RulerSettings {
  int64_t context_length = 4096;  // tokens of prompt + generation
  int64_t samples = 100;
  uint64_t seed = 42;
  std::filesystem::path data_dir;  // qa_1, qa_2
};

// Throws std::runtime_error naming the task when the vocabulary has too few words, the context
// length is too short for the task, or a QA file is missing or malformed (file, line, field).
std::vector<RecallSample> generate_ruler_samples(std::string_view task, const RulerSettings& settings,
                                                 const data::Tokenizer& tokenizer,
                                                 const std::vector<VocabularyWord>& words);

}  // namespace linea::eval

// The zero-shot items lm-eval-harness builds from its data sets, as linea scores them.
//   ChoiceItem: a question with k candidate continuations, one gold. Each candidate i is scored as
//     log p(continuations[i] | contexts[i]) (contexts has k entries; most tasks repeat one context,
//     WinoGrande puts each option into the context and scores the same continuation after it).
//     norm_bytes[i] is the UTF-8 byte length of the choice string that acc_norm divides by (lm-eval's
//     `len(choice)` of the strings doc_to_choice gives; bytes = characters for ASCII).
//   LastWordItem: LAMBADA, a passage and its last word (with the space before it).
#pragma once
#include <string>
#include <vector>

namespace linea::eval {

struct ChoiceItem {
  std::vector<std::string> contexts;
  std::vector<std::string> continuations;
  std::vector<double> norm_bytes;
  int gold = 0;
};

struct LastWordItem {
  std::string context;
  std::string target;
};

}  // namespace linea::eval

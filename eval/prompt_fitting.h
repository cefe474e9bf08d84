// Fitting a synthetic task's prompt to a context length: the tasks grow with a count n (haystack
// sentences, listed words, documents; at most max_n), and the prompt of a sample is build(n) for
// the largest n ≤ max_n whose token count is at most `budget` (RULER's max_seq_length − tokens_to_generate), found by
// doubling then bisection on the tokenized prompt. Throws std::runtime_error naming `task` when
// even build(min_n) is longer than the budget.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "data/tokenizer.h"

namespace linea::eval {

std::string fit_prompt(const data::Tokenizer& tokenizer, int64_t budget, int64_t min_n, int64_t max_n,
                       const std::function<std::string(int64_t n)>& build, const std::string& task);

}  // namespace linea::eval

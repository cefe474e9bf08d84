#include "eval/prompt_fitting.h"

#include <algorithm>
#include <stdexcept>

namespace linea::eval {

std::string fit_prompt(const data::Tokenizer& tokenizer, int64_t budget, int64_t min_n, int64_t max_n,
                       const std::function<std::string(int64_t n)>& build, const std::string& task) {
  auto fits = [&](int64_t n) { return int64_t(tokenizer.encode(build(n)).size()) <= budget; };
  if (!fits(min_n)) {
    throw std::runtime_error(task + ": the prompt needs more than the " + std::to_string(budget) +
                             " tokens of this context length; choose a longer one");
  }
  if (min_n >= max_n) return build(min_n);
  int64_t good = min_n, bad = std::min(max_n, std::max<int64_t>(min_n + 1, 2 * min_n));
  while (fits(bad)) {
    if (bad == max_n) return build(max_n);
    good = bad;
    bad = std::min(max_n, 2 * bad);
  }
  while (bad - good > 1) {  // fits(good), !fits(bad)
    const int64_t mid = good + (bad - good) / 2;
    (fits(mid) ? good : bad) = mid;
  }
  return build(good);
}

}  // namespace linea::eval

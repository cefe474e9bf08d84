// How a (context, continuation) pair of strings becomes a LanguageModel score request, as
// lm-eval-harness tokenizes it: spaces at the end of the context move to the front of the
// continuation; the continuation's tokens are those of encode(context + continuation) after the
// first |encode(context)| (so a merge across the boundary is scored as the continuation's); the
// context is preceded by the tokenizer's document token, which precedes every document the model
// was trained on (lm-eval's end-of-text prefix for an empty context, used for every context here).
// Requests go to the model in batches of `batch_size`, answered in order.
#pragma once
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "inference/language_model.h"

namespace linea::eval {

inference::ScoreRequest make_score_request(const data::Tokenizer& tokenizer, const std::string& context,
                                           const std::string& continuation);

std::vector<inference::ScoreResult> score_in_batches(inference::LanguageModel& model,
                                                     const std::vector<inference::ScoreRequest>& requests,
                                                     size_t batch_size = 32);

}  // namespace linea::eval

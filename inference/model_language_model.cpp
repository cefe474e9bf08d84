#include "inference/model_language_model.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "inference/decoder.h"

namespace linea::inference {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Whether `text` ends with one of the stop sequences.
bool ends_with_stop(const TokenIds& text, const std::vector<TokenIds>& stops) {
  for (const TokenIds& stop : stops) {
    if (!stop.empty() && stop.size() <= text.size() && std::equal(stop.rbegin(), stop.rend(), text.rbegin())) {
      return true;
    }
  }
  return false;
}

}  // namespace

ModelLanguageModel::ModelLanguageModel(Model& model, Options options) : model_(model), options_(options) {
  if (options.max_batch_tokens < 1 || options.max_batch_sequences < 1) {
    throw std::invalid_argument("ModelLanguageModel: max_batch_tokens and max_batch_sequences must be ≥ 1");
  }
}

void ModelLanguageModel::check_ids(const TokenIds& ids, const char* what, size_t request) const {
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) {
      throw std::invalid_argument("request " + std::to_string(request) + ": " + what + " token " + std::to_string(id) +
                                  " is outside the vocabulary [0, " + std::to_string(vocab_size()) + ")");
    }
  }
}

std::vector<ScoreResult> ModelLanguageModel::score(const std::vector<ScoreRequest>& requests) {
  std::vector<ScoreResult> results(requests.size());
  size_t first = 0;
  while (first < requests.size()) {
    // Pack requests [first, end) as documents of context + continuation.
    SeqLayout seqs;
    std::vector<int32_t> ids;
    std::vector<int64_t> rows;  // the rows predicting scored tokens, request by request
    size_t end = first;
    while (end < requests.size()) {
      const ScoreRequest& r = requests[end];
      check_ids(r.context, "context", end);
      check_ids(r.continuation, "continuation", end);
      const int64_t length = static_cast<int64_t>(r.context.size() + r.continuation.size());
      if (end > first && static_cast<int64_t>(ids.size()) + length > options_.max_batch_tokens) break;
      const int64_t begin = static_cast<int64_t>(ids.size());
      ids.insert(ids.end(), r.context.begin(), r.context.end());
      ids.insert(ids.end(), r.continuation.begin(), r.continuation.end());
      // continuation[i] sits at begin + |context| + i and is predicted by the row before it.
      for (size_t i = r.context.empty() ? 1 : 0; i < r.continuation.size(); ++i) {
        rows.push_back(begin + static_cast<int64_t>(r.context.size() + i) - 1);
      }
      if (length > 0) seqs.cu_seqlens.push_back(static_cast<int64_t>(ids.size()));
      ++end;
    }
    if (!rows.empty()) {
      Tensor id_tensor = Tensor::empty({static_cast<int64_t>(ids.size())}, DType::i32);
      std::copy(ids.begin(), ids.end(), id_tensor.data<int32_t>());
      const Tensor logits = model_.logits(id_tensor, seqs, rows);
      int64_t row = 0;
      for (size_t q = first; q < end; ++q) {
        const ScoreRequest& r = requests[q];
        for (size_t i = r.context.empty() ? 1 : 0; i < r.continuation.size(); ++i, ++row) {
          const int32_t token = r.continuation[i];
          results[q].log_likelihood += token_log_probability(logits, row, token);
          results[q].greedy = results[q].greedy && argmax_token(logits, row) == token;
        }
      }
    }
    first = end;
  }
  return results;
}

std::vector<TokenIds> ModelLanguageModel::generate(const std::vector<GenerateRequest>& requests) {
  return generate(requests, SamplingOptions{});
}

std::vector<TokenIds> ModelLanguageModel::generate(const std::vector<GenerateRequest>& requests,
                                                   const SamplingOptions& sampling, const StopTest& stop_test) {
  sampling.validate();
  for (size_t i = 0; i < requests.size(); ++i) {
    check_ids(requests[i].prompt, "prompt", i);
    if (requests[i].prompt.empty()) throw std::invalid_argument("request " + std::to_string(i) + ": empty prompt");
    if (requests[i].max_tokens < 0) {
      throw std::invalid_argument("request " + std::to_string(i) + ": max_tokens must be ≥ 0");
    }
  }
  stats_ = GenerateStats{};
  std::vector<TokenIds> out(requests.size());
  const size_t batch = static_cast<size_t>(options_.max_batch_sequences);
  for (size_t first = 0; first < requests.size(); first += batch) {
    generate_batch(requests, first, std::min(requests.size(), first + batch), sampling, stop_test, out);
  }
  return out;
}

void ModelLanguageModel::generate_batch(const std::vector<GenerateRequest>& requests, size_t first, size_t end,
                                        const SamplingOptions& sampling, const StopTest& stop_test,
                                        std::vector<TokenIds>& out) {
  const int64_t S = static_cast<int64_t>(end - first);
  std::vector<TokenIds> prompts;
  std::vector<std::mt19937_64> rngs;
  std::vector<bool> done(static_cast<size_t>(S));
  for (size_t i = first; i < end; ++i) {
    prompts.push_back(requests[i].prompt);
    std::seed_seq seed{static_cast<uint64_t>(sampling.seed), static_cast<uint64_t>(i)};
    rngs.emplace_back(seed);
    stats_.prefill_tokens += static_cast<int64_t>(requests[i].prompt.size());
    done[i - first] = requests[i].max_tokens == 0;
  }
  Decoder decoder(model_, S);
  auto start = std::chrono::steady_clock::now();
  Tensor logits = decoder.prefill(prompts);
  stats_.prefill_seconds += seconds_since(start);
  start = std::chrono::steady_clock::now();
  TokenIds next(static_cast<size_t>(S), 0);
  while (true) {
    bool any = false;
    for (int64_t s = 0; s < S; ++s) {
      const size_t q = first + static_cast<size_t>(s);
      if (done[s]) continue;  // a finished sequence is fed its last token again; its output is dropped
      next[s] = sample_token(logits, s, sampling, rngs[s]);
      out[q].push_back(next[s]);
      done[s] = static_cast<int64_t>(out[q].size()) >= requests[q].max_tokens ||
                ends_with_stop(out[q], requests[q].stop) || (stop_test && stop_test(q, out[q]));
      any = any || !done[s];
    }
    if (!any) break;
    logits = decoder.step(next);
    stats_.decode_tokens += std::count(done.begin(), done.end(), false);
    stats_.peak_state_bytes = std::max(stats_.peak_state_bytes, decoder.state_bytes());
  }
  stats_.decode_seconds += seconds_since(start);
  stats_.peak_state_bytes = std::max(stats_.peak_state_bytes, decoder.state_bytes());
}

}  // namespace linea::inference

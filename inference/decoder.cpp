#include "inference/decoder.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace linea::inference {

Decoder::Decoder(Model& model, int64_t sequences)
    : model_(model), sequences_(sequences), state_(model.start_decoding(sequences)) {
  if (sequences < 1) throw std::invalid_argument("Decoder: at least one sequence, got " + std::to_string(sequences));
}

Tensor Decoder::prefill(const std::vector<TokenIds>& prompts) {
  if (prefilled_) throw std::logic_error("Decoder::prefill: already prefilled");
  if (static_cast<int64_t>(prompts.size()) != sequences_) {
    throw std::invalid_argument("Decoder::prefill: " + std::to_string(prompts.size()) + " prompts for " +
                                std::to_string(sequences_) + " sequences");
  }
  SeqLayout seqs;
  std::vector<int32_t> ids;
  std::vector<int64_t> last_rows;
  for (size_t s = 0; s < prompts.size(); ++s) {
    if (prompts[s].empty()) throw std::invalid_argument("Decoder::prefill: prompt " + std::to_string(s) + " is empty");
    ids.insert(ids.end(), prompts[s].begin(), prompts[s].end());
    seqs.cu_seqlens.push_back(static_cast<int64_t>(ids.size()));
    last_rows.push_back(static_cast<int64_t>(ids.size()) - 1);
  }
  Tensor id_tensor = Tensor::empty({static_cast<int64_t>(ids.size())}, DType::i32);
  std::copy(ids.begin(), ids.end(), id_tensor.data<int32_t>());
  prefilled_ = true;
  return model_.logits_continuing(id_tensor, seqs, state_, last_rows);
}

Tensor Decoder::step(const TokenIds& tokens) {
  if (!prefilled_) throw std::logic_error("Decoder::step: prefill first");
  if (static_cast<int64_t>(tokens.size()) != sequences_) {
    throw std::invalid_argument("Decoder::step: " + std::to_string(tokens.size()) + " tokens for " +
                                std::to_string(sequences_) + " sequences");
  }
  Tensor id_tensor = Tensor::empty({sequences_}, DType::i32);
  std::copy(tokens.begin(), tokens.end(), id_tensor.data<int32_t>());
  std::vector<int64_t> rows(static_cast<size_t>(sequences_));
  for (int64_t s = 0; s < sequences_; ++s) rows[static_cast<size_t>(s)] = s;
  return model_.logits_continuing(id_tensor, SeqLayout::uniform(sequences_, 1), state_, rows);
}

size_t Decoder::state_bytes() const { return state_.bytes(); }

}  // namespace linea::inference

#include "data/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <stdexcept>
#include <unordered_map>

#include "data/atomic_file.h"

namespace linea::data {

namespace {

constexpr size_t kMaxSentenceBytes = 4192;  // SentencePiece's default max_sentence_length

class VectorSentenceIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorSentenceIterator(const std::vector<std::string>& sentences) : sentences_(sentences) { load(); }
  bool done() const override { return index_ >= sentences_.size(); }
  void Next() override {
    ++index_;
    load();
  }
  const std::string& value() const override { return current_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void load() {
    if (done()) return;
    const std::string& s = sentences_[index_];
    size_t n = std::min(s.size(), kMaxSentenceBytes);
    while (n < s.size() && n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // whole characters
    current_.assign(s, 0, n);
  }
  const std::vector<std::string>& sentences_;
  size_t index_ = 0;
  std::string current_;
};

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::filesystem::path& model_file)
    : SentencePieceTokenizer(read_file(model_file), "tokenizer file " + model_file.string()) {}

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& serialized_model, const std::string& source)
    : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  const auto status = processor_->LoadFromSerializedProto(serialized_model);
  if (!status.ok()) throw std::runtime_error(source + ": not a SentencePiece model (" + status.ToString() + ")");
  check_loaded(source);
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

void SentencePieceTokenizer::check_loaded(const std::string& source) const {
  if (processor_->GetPieceSize() <= 0) throw std::runtime_error(source + ": the model has no pieces");
  if (processor_->eos_id() < 0) throw std::runtime_error(source + ": the model has no </s> (EOS) piece");
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = processor_->Encode(absl::string_view(text.data(), text.size()), &ids);
  if (!status.ok()) throw std::runtime_error("SentencePiece encode failed: " + status.ToString());
  return {ids.begin(), ids.end()};
}

std::string SentencePieceTokenizer::decode(std::span<const int32_t> ids) const {
  std::vector<int> checked(ids.begin(), ids.end());
  for (int id : checked) {
    if (id < 0 || id >= vocab_size()) {
      throw std::out_of_range("SentencePiece decode: id " + std::to_string(id) + " outside [0, " +
                              std::to_string(vocab_size()) + ")");
    }
  }
  std::string text;
  const auto status = processor_->Decode(checked, &text);
  if (!status.ok()) throw std::runtime_error("SentencePiece decode failed: " + status.ToString());
  return text;
}

int32_t SentencePieceTokenizer::vocab_size() const { return processor_->GetPieceSize(); }
int32_t SentencePieceTokenizer::eos_id() const { return processor_->eos_id(); }
std::string SentencePieceTokenizer::serialized_model() const { return processor_->serialized_model_proto(); }

std::string train_sentencepiece(const std::vector<std::string>& sentences, const SentencePieceTrainOptions& options) {
  if (sentences.empty()) throw std::invalid_argument("SentencePiece training needs at least one sentence");
  if (options.vocab_size < 300) {
    throw std::invalid_argument("SentencePiece vocabulary size " + std::to_string(options.vocab_size) +
                                ": expected at least 300 (256 byte pieces, specials and some merges)");
  }
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", options.model_type},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"hard_vocab_limit", "false"},
      {"character_coverage", std::to_string(options.character_coverage)},
      {"byte_fallback", "true"},
      {"split_digits", "true"},
      {"allow_whitespace_only_pieces", "true"},
      {"remove_extra_whitespaces", "false"},
      {"normalization_rule_name", "identity"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"num_threads", std::to_string(std::max(1, options.threads))},
      {"minloglevel", "2"},
  };
  sentencepiece::SetRandomGeneratorSeed(options.seed);
  VectorSentenceIterator it(sentences);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
  if (!status.ok()) throw std::runtime_error("SentencePiece training failed: " + status.ToString());
  return model;
}

}  // namespace linea::data

#include "data/hf_tokenizer.h"

#include <cstdio>
#include <deque>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "data/atomic_file.h"
#include "data/gpt2_bpe_tokenizer.h"
#include "data/unicode_classes.h"

namespace linea::data {

namespace {

using nlohmann::json;

// Typed access to the JSON with errors that name the file and the field.
class Fields {
 public:
  explicit Fields(std::string file) : file_(std::move(file)) {}
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw std::runtime_error("tokenizer file " + file_ + ": field '" + path + "': " + what);
  }
  const json& get(const json& object, const std::string& key, const std::string& path) const {
    if (!object.is_object() || !object.contains(key)) fail(path, "expected it to be present");
    return object.at(key);
  }
  std::string string(const json& object, const std::string& key, const std::string& path) const {
    const json& v = get(object, key, path);
    if (!v.is_string()) fail(path, "expected a string");
    return v.get<std::string>();
  }
  bool boolean(const json& object, const std::string& key, const std::string& path, bool fallback) const {
    if (!object.contains(key) || object.at(key).is_null()) return fallback;
    if (!object.at(key).is_boolean()) fail(path, "expected true or false");
    return object.at(key).get<bool>();
  }
  // Fields that must be absent, null, false, 0 or "" (features linea does not implement).
  void unset(const json& object, const std::string& key, const std::string& path, const std::string& feature) const {
    if (!object.contains(key)) return;
    const json& v = object.at(key);
    if (v.is_null() || v == false || v == 0 || v == "") return;
    fail(path, "unsupported " + feature + " (" + v.dump() + ")");
  }
  int32_t id(const json& v, const std::string& path) const {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= INT32_MAX) {
      fail(path, "expected a token id ≥ 0");
    }
    return static_cast<int32_t>(v.get<int64_t>());
  }

 private:
  std::string file_;
};

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  size_t pos = 0;
  for (size_t at; (at = s.find(from, pos)) != std::string_view::npos; pos = at + from.size()) {
    out.append(s, pos, at - pos);
    out.append(to);
  }
  out.append(s, pos);
  return out;
}

}  // namespace

HfTokenizer::~HfTokenizer() = default;

HfTokenizer::HfTokenizer(const std::filesystem::path& file) {
  const Fields f(file.string());
  json doc;
  try {
    doc = json::parse(read_file(file));
  } catch (const json::parse_error& e) {
    throw std::runtime_error("tokenizer file " + file.string() + ": not valid JSON (" + e.what() + ")");
  }
  if (!doc.is_object()) f.fail("(top level)", "expected a JSON object");

  // model
  const json& model = f.get(doc, "model", "model");
  const std::string type = model.is_object() && model.contains("type") ? f.string(model, "type", "model.type") : "BPE";
  if (type != "BPE") f.fail("model.type", "unsupported model \"" + type + "\" (linea reads BPE)");
  f.unset(model, "dropout", "model.dropout", "BPE dropout");
  f.unset(model, "continuing_subword_prefix", "model.continuing_subword_prefix", "subword prefix");
  f.unset(model, "end_of_word_suffix", "model.end_of_word_suffix", "end-of-word suffix");
  ignore_merges_ = f.boolean(model, "ignore_merges", "model.ignore_merges", false);
  byte_fallback_ = f.boolean(model, "byte_fallback", "model.byte_fallback", false);
  fuse_unk_ = f.boolean(model, "fuse_unk", "model.fuse_unk", false);
  const json& vocab = f.get(model, "vocab", "model.vocab");
  if (!vocab.is_object() || vocab.empty()) f.fail("model.vocab", "expected a non-empty object token → id");
  for (const auto& [token, value] : vocab.items()) {
    const int32_t id = f.id(value, "model.vocab[\"" + token + "\"]");
    if (static_cast<size_t>(id) >= token_.size()) token_.resize(static_cast<size_t>(id) + 1);
    token_[static_cast<size_t>(id)] = token;
    id_of_.emplace(token, id);
  }
  vocab_size_ = static_cast<int32_t>(token_.size());

  // added_tokens
  if (doc.contains("added_tokens") && !doc["added_tokens"].is_null()) {
    const json& added = doc["added_tokens"];
    if (!added.is_array()) f.fail("added_tokens", "expected an array");
    for (size_t i = 0; i < added.size(); ++i) {
      const std::string at = "added_tokens[" + std::to_string(i) + "]";
      const int32_t id = f.id(f.get(added[i], "id", at + ".id"), at + ".id");
      added_[id] = f.string(added[i], "content", at + ".content");
      vocab_size_ = std::max(vocab_size_, id + 1);
    }
  }

  // normalizer
  const std::function<void(const json&, const std::string&)> read_normalizer = [&](const json& n,
                                                                                   const std::string& path) {
    if (n.is_null()) return;
    const std::string kind = f.string(n, "type", path + ".type");
    if (kind == "Sequence") {
      const json& list = f.get(n, "normalizers", path + ".normalizers");
      if (!list.is_array()) f.fail(path + ".normalizers", "expected an array");
      for (size_t i = 0; i < list.size(); ++i)
        read_normalizer(list[i], path + ".normalizers[" + std::to_string(i) + "]");
    } else if (kind == "Prepend") {
      normalizer_.push_back({"", f.string(n, "prepend", path + ".prepend")});
    } else if (kind == "Replace") {
      const json& pattern = f.get(n, "pattern", path + ".pattern");
      if (!pattern.is_object() || !pattern.contains("String")) {
        f.fail(path + ".pattern", "unsupported: a Replace by regex (linea replaces a String)");
      }
      const std::string from = f.string(pattern, "String", path + ".pattern.String");
      if (from.empty()) f.fail(path + ".pattern.String", "expected a non-empty string");
      normalizer_.push_back({from, f.string(n, "content", path + ".content")});
    } else {
      f.fail(path + ".type", "unsupported normalizer \"" + kind + "\" (linea applies Prepend and Replace)");
    }
  };
  if (doc.contains("normalizer")) read_normalizer(doc["normalizer"], "normalizer");

  // pre_tokenizer
  const std::function<void(const json&, const std::string&)> read_step = [&](const json& p, const std::string& path) {
    if (p.is_null()) return;
    const std::string kind = f.string(p, "type", path + ".type");
    Step step;
    if (kind == "Sequence") {
      const json& list = f.get(p, "pretokenizers", path + ".pretokenizers");
      if (!list.is_array()) f.fail(path + ".pretokenizers", "expected an array");
      for (size_t i = 0; i < list.size(); ++i) read_step(list[i], path + ".pretokenizers[" + std::to_string(i) + "]");
      return;
    } else if (kind == "ByteLevel") {
      step.kind = Step::Kind::byte_level;
      step.prefix_space = f.boolean(p, "add_prefix_space", path + ".add_prefix_space", true);
      step.use_regex = f.boolean(p, "use_regex", path + ".use_regex", true);
    } else if (kind == "Split") {
      step.kind = Step::Kind::split;
      const json& pattern = f.get(p, "pattern", path + ".pattern");
      if (!pattern.is_object() || !pattern.contains("Regex")) {
        f.fail(path + ".pattern", "unsupported: a Split on a String (linea splits by a known regex)");
      }
      const std::string regex = f.string(pattern, "Regex", path + ".pattern.Regex");
      const auto known = pattern_from_regex(regex);
      if (!known) {
        f.fail(path + ".pattern.Regex",
               "unsupported regex " + regex + " (linea implements those of gpt2, cl100k, llama3 and o200k)");
      }
      step.pattern = *known;
      const std::string behavior = f.string(p, "behavior", path + ".behavior");
      if (behavior != "Isolated") f.fail(path + ".behavior", "unsupported \"" + behavior + "\" (linea: Isolated)");
      if (f.boolean(p, "invert", path + ".invert", false)) f.fail(path + ".invert", "unsupported: an inverted Split");
    } else if (kind == "Metaspace") {
      step.kind = Step::Kind::metaspace;
      step.replacement = f.string(p, "replacement", path + ".replacement");
      if (step.replacement.empty()) f.fail(path + ".replacement", "expected a non-empty string");
      std::string scheme = "always";
      if (p.contains("prepend_scheme")) {
        scheme = f.string(p, "prepend_scheme", path + ".prepend_scheme");
      } else if (!f.boolean(p, "add_prefix_space", path + ".add_prefix_space", true)) {
        scheme = "never";
      }
      if (scheme == "always") {
        step.prepend = Step::Prepend::always;
      } else if (scheme == "first") {
        step.prepend = Step::Prepend::first;
      } else if (scheme == "never") {
        step.prepend = Step::Prepend::never;
      } else {
        f.fail(path + ".prepend_scheme", "expected always, first or never, got \"" + scheme + "\"");
      }
      step.split = f.boolean(p, "split", path + ".split", true);
    } else {
      f.fail(path + ".type", "unsupported pre-tokenizer \"" + kind + "\" (linea: ByteLevel, Split, Metaspace)");
    }
    if (!steps_.empty() && steps_.back().kind == Step::Kind::byte_level) {
      f.fail(path, "unsupported: a pre-tokenizer after ByteLevel (linea maps bytes last)");
    }
    steps_.push_back(step);
  };
  if (doc.contains("pre_tokenizer")) read_step(doc["pre_tokenizer"], "pre_tokenizer");
  const bool is_byte_level = !steps_.empty() && steps_.back().kind == Step::Kind::byte_level;

  // merges
  const json& merges = f.get(model, "merges", "model.merges");
  if (!merges.is_array()) f.fail("model.merges", "expected an array");
  if (is_byte_level) {
    std::vector<std::string> token_bytes(token_.size());
    for (size_t id = 0; id < token_.size(); ++id) token_bytes[id] = gpt2_symbol_bytes(token_[id]);
    byte_level_ = std::make_unique<ByteLevelBpe>(std::move(token_bytes), "tokenizer file " + file.string());
  }
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string at = "model.merges[" + std::to_string(i) + "]";
    std::string left, right;
    if (merges[i].is_string()) {
      const std::string m = merges[i];
      const size_t space = m.find(' ');
      if (space == std::string::npos || m.find(' ', space + 1) != std::string::npos) {
        f.fail(at, "expected \"LEFT RIGHT\", got \"" + m + "\"");
      }
      left = m.substr(0, space);
      right = m.substr(space + 1);
    } else if (merges[i].is_array() && merges[i].size() == 2 && merges[i][0].is_string() && merges[i][1].is_string()) {
      left = merges[i][0];
      right = merges[i][1];
    } else {
      f.fail(at, "expected \"LEFT RIGHT\" or [LEFT, RIGHT]");
    }
    const auto l = id_of_.find(left), r = id_of_.find(right), m = id_of_.find(left + right);
    if (l == id_of_.end() || r == id_of_.end() || m == id_of_.end()) {
      f.fail(at, "\"" +
                     (l == id_of_.end()   ? left
                      : r == id_of_.end() ? right
                                          : left + right) +
                     "\" is not in model.vocab");
    }
    if (is_byte_level) {
      byte_level_->add_merge(gpt2_symbol_bytes(left), gpt2_symbol_bytes(right), static_cast<int32_t>(i),
                             "tokenizer file " + file.string() + " " + at);
    } else {
      merges_.add(l->second, r->second, static_cast<int32_t>(i), m->second);
    }
  }

  // SentencePiece-style symbols.
  if (!is_byte_level) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      const auto it = id_of_.find(name);
      byte_token_[static_cast<size_t>(b)] = it == id_of_.end() ? -1 : it->second;
      if (it != id_of_.end()) byte_of_[it->second] = static_cast<char>(b);
    }
    if (model.contains("unk_token") && !model["unk_token"].is_null()) {
      const std::string unk = f.string(model, "unk_token", "model.unk_token");
      const auto it = id_of_.find(unk);
      if (it == id_of_.end()) f.fail("model.unk_token", "\"" + unk + "\" is not in model.vocab");
      unk_id_ = it->second;
    }
    for (const Replace& r : normalizer_) {
      if (r.from.empty()) strip_leading_space_ = true;
      if (r.from == " ") space_symbol_ = r.to;
    }
    for (const Step& s : steps_) {
      if (s.kind == Step::Kind::metaspace) {
        space_symbol_ = s.replacement;
        strip_leading_space_ = strip_leading_space_ || s.prepend != Step::Prepend::never;
      }
    }
  }

  // The document separator.
  const auto added_id = [&](const std::string& content) -> int32_t {
    for (const auto& [id, c] : added_) {
      if (c == content) return id;
    }
    const auto it = id_of_.find(content);
    return it == id_of_.end() ? -1 : it->second;
  };
  std::vector<const json*> processors;
  if (doc.contains("post_processor") && doc["post_processor"].is_object()) {
    processors.push_back(&doc["post_processor"]);
    if (doc["post_processor"].contains("processors") && doc["post_processor"]["processors"].is_array()) {
      for (const json& p : doc["post_processor"]["processors"]) processors.push_back(&p);
    }
  }
  for (const json* p : processors) {
    if (!p->contains("type") || (*p)["type"] != "TemplateProcessing" || !p->contains("single")) continue;
    const json& single = (*p)["single"];
    if (!single.is_array() || single.empty() || !single[0].contains("SpecialToken")) continue;
    const json& special = single[0]["SpecialToken"];
    if (!special.contains("id") || !special["id"].is_string()) continue;
    const std::string name = special["id"];
    const json* specials = p->contains("special_tokens") ? &(*p)["special_tokens"] : nullptr;
    if (specials && specials->contains(name) && (*specials)[name].contains("ids") &&
        !(*specials)[name]["ids"].empty()) {
      eos_id_ = f.id((*specials)[name]["ids"][0], "post_processor.special_tokens." + name + ".ids[0]");
    } else {
      eos_id_ = added_id(name);
    }
    break;
  }
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"}) {
    if (eos_id_ < 0) eos_id_ = added_id(name);
  }
  if (eos_id_ < 0 || eos_id_ >= vocab_size_) {
    throw std::runtime_error("tokenizer file " + file.string() +
                             ": no document separator: expected a TemplateProcessing post-processor that starts with a "
                             "special token, or an added token <|endoftext|>, <|end_of_text|>, </s> or <eos>");
  }
}

std::string HfTokenizer::normalize(std::string_view text) const {
  std::string s(text);
  for (const Replace& r : normalizer_) {
    if (r.from.empty()) {
      if (!s.empty()) s.insert(0, r.to);
    } else {
      s = replace_all(s, r.from, r.to);
    }
  }
  return s;
}

void HfTokenizer::pieces(std::string_view text, std::vector<std::string_view>& out,
                         std::deque<std::string>& storage) const {
  std::vector<std::string_view> current{text}, next;
  for (const Step& step : steps_) {
    next.clear();
    for (size_t i = 0; i < current.size(); ++i) {
      std::string_view piece = current[i];
      switch (step.kind) {
        case Step::Kind::split: pretokenize(step.pattern, piece, next); break;
        case Step::Kind::byte_level:
          if (step.prefix_space && !starts_with(piece, " ")) {
            piece = storage.emplace_back(" " + std::string(piece));
          }
          if (step.use_regex) {
            pretokenize(PretokenizerPattern::gpt2, piece, next);
          } else {
            next.push_back(piece);
          }
          break;
        case Step::Kind::metaspace: {
          std::string s = replace_all(piece, " ", step.replacement);
          const bool prepend =
              step.prepend == Step::Prepend::always || (step.prepend == Step::Prepend::first && i == 0);
          if (prepend && !starts_with(s, step.replacement)) s.insert(0, step.replacement);
          const std::string_view kept = storage.emplace_back(std::move(s));
          if (!step.split) {
            next.push_back(kept);
            break;
          }
          // Each replacement starts a piece (tokenizers' MergedWithNext).
          size_t begin = 0;
          for (size_t at = kept.find(step.replacement, 1); at != std::string_view::npos;
               at = kept.find(step.replacement, at + step.replacement.size())) {
            if (at > begin) next.push_back(kept.substr(begin, at - begin));
            begin = at;
          }
          if (begin < kept.size()) next.push_back(kept.substr(begin));
          break;
        }
      }
    }
    std::swap(current, next);
  }
  for (std::string_view p : current) {
    if (!p.empty()) out.push_back(p);
  }
}

void HfTokenizer::encode_characters(std::string_view piece, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (const auto it = id_of_.find(std::string(piece)); it != id_of_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  thread_local std::vector<int32_t> symbols;
  symbols.clear();
  bool last_unk = false;
  for (size_t pos = 0; pos < piece.size();) {
    int len;
    decode_utf8(piece, pos, &len);
    const std::string c(piece.substr(pos, static_cast<size_t>(len)));
    pos += static_cast<size_t>(len);
    if (const auto it = id_of_.find(c); it != id_of_.end()) {
      symbols.push_back(it->second);
      last_unk = false;
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char b : c) all = all && byte_token_[static_cast<unsigned char>(b)] >= 0;
      if (all) {
        for (char b : c) symbols.push_back(byte_token_[static_cast<unsigned char>(b)]);
        last_unk = false;
        continue;
      }
    }
    if (unk_id_ >= 0 && !(fuse_unk_ && last_unk)) symbols.push_back(unk_id_);
    last_unk = unk_id_ >= 0;
  }
  merges_.merge(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  const std::string normalized = normalizer_.empty() ? std::string() : normalize(text);
  std::deque<std::string> storage;
  std::vector<std::string_view> parts;
  pieces(normalizer_.empty() ? text : std::string_view(normalized), parts, storage);
  for (std::string_view piece : parts) {
    if (byte_level_) {
      byte_level_->encode_piece(piece, ignore_merges_, ids);
    } else {
      encode_characters(piece, ids);
    }
  }
  return ids;
}

std::string HfTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size_) {
      throw std::out_of_range("decode: id " + std::to_string(id) + " outside [0, " + std::to_string(vocab_size_) + ")");
    }
    if (const auto it = added_.find(id); it != added_.end() && static_cast<size_t>(id) >= token_.size()) {
      text += it->second;
    } else if (byte_level_) {
      byte_level_->decode(id, text);
    } else if (const auto byte = byte_of_.find(id); byte_fallback_ && byte != byte_of_.end()) {
      text.push_back(byte->second);
    } else {
      text += token_[static_cast<size_t>(id)];
    }
  }
  if (!byte_level_ && !space_symbol_.empty()) {
    text = replace_all(text, space_symbol_, " ");
    if (strip_leading_space_ && starts_with(text, " ")) text.erase(0, 1);
  }
  return text;
}

}  // namespace linea::data

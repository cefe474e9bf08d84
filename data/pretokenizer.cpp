#include "data/pretokenizer.h"

#include <array>
#include <initializer_list>
#include <string>

#include "data/unicode_classes.h"

namespace linea::data {

namespace {

// Character class bits: one per CharClass, then the few characters the regexes name.
using Mask = uint16_t;
constexpr Mask bit(CharClass c) { return static_cast<Mask>(1u << static_cast<unsigned>(c)); }
constexpr Mask kUpper = bit(CharClass::upper), kLower = bit(CharClass::lower), kTitle = bit(CharClass::title),
               kModifier = bit(CharClass::modifier), kOtherLetter = bit(CharClass::other_letter),
               kMark = bit(CharClass::mark), kNumber = bit(CharClass::number), kSpace = bit(CharClass::space);
constexpr Mask kLetter = kUpper | kLower | kTitle | kModifier | kOtherLetter;
constexpr Mask kCr = 1u << 10, kLf = 1u << 11, kBlank = 1u << 12, kSlash = 1u << 13;  // '\r' '\n' ' ' '/'
constexpr Mask kNewline = kCr | kLf;

struct Char {
  uint32_t cp;
  Mask mask;
  uint32_t offset;  // byte offset in the text
};

// One element of an alternative.
struct Item {
  enum class Kind : uint8_t { cls, contraction, end_of_text, not_before_nonspace };
  Kind kind = Kind::cls;
  Mask mask = 0;  // cls: the characters it matches (negated: those it does not)
  bool negate = false;
  uint16_t min = 1, max = 1;  // repetitions; kMany = unbounded
  bool possessive = false;
  bool case_insensitive = false;  // contraction
};
constexpr uint16_t kMany = 0xFFFF;

Item cls(Mask mask, uint16_t min, uint16_t max, bool possessive = false) {
  return {Item::Kind::cls, mask, false, min, max, possessive, false};
}
Item not_cls(Mask mask, uint16_t min, uint16_t max, bool possessive = false) {
  return {Item::Kind::cls, mask, true, min, max, possessive, false};
}
Item contraction(bool case_insensitive, uint16_t min = 1) {
  return {Item::Kind::contraction, 0, false, min, 1, false, case_insensitive};
}
Item end_of_text() { return {Item::Kind::end_of_text, 0, false, 1, 1, false, false}; }
Item not_before_nonspace() { return {Item::Kind::not_before_nonspace, 0, false, 1, 1, false, false}; }

using Alternative = std::vector<Item>;

struct Pattern {
  std::string_view name, regex;
  std::vector<Alternative> alternatives;
};

const std::array<Pattern, 4>& patterns() {
  static const std::array<Pattern, 4> table = [] {
    const Mask not_letter_number_newline = kNewline | kLetter | kNumber;  // [^\r\n\p{L}\p{N}]
    const Mask not_space_letter_number = kSpace | kLetter | kNumber;      // [^\s\p{L}\p{N}]
    const Mask upperish = kUpper | kTitle | kModifier | kOtherLetter | kMark;
    const Mask lowerish = kLower | kModifier | kOtherLetter | kMark;
    std::array<Pattern, 4> p;
    p[0] = {"gpt2",
            R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
            {{contraction(false)},
             {cls(kBlank, 0, 1), cls(kLetter, 1, kMany)},
             {cls(kBlank, 0, 1), cls(kNumber, 1, kMany)},
             {cls(kBlank, 0, 1), not_cls(not_space_letter_number, 1, kMany)},
             {cls(kSpace, 1, kMany), not_before_nonspace()},
             {cls(kSpace, 1, kMany)}}};
    p[1] = {
        "cl100k",
        R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s)",
        {{contraction(true)},
         {not_cls(not_letter_number_newline, 0, 1, true), cls(kLetter, 1, kMany, true)},
         {cls(kNumber, 1, 3, true)},
         {cls(kBlank, 0, 1), not_cls(not_space_letter_number, 1, kMany, true), cls(kNewline, 0, kMany, true)},
         {cls(kSpace, 1, kMany, true), end_of_text()},
         {cls(kSpace, 0, kMany), cls(kNewline, 1, 1)},
         {cls(kSpace, 1, kMany), not_before_nonspace()},
         {cls(kSpace, 1, 1)}}};
    p[2] = {
        "llama3",
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
        {{contraction(true)},
         {not_cls(not_letter_number_newline, 0, 1), cls(kLetter, 1, kMany)},
         {cls(kNumber, 1, 3)},
         {cls(kBlank, 0, 1), not_cls(not_space_letter_number, 1, kMany), cls(kNewline, 0, kMany)},
         {cls(kSpace, 0, kMany), cls(kNewline, 1, kMany)},
         {cls(kSpace, 1, kMany), not_before_nonspace()},
         {cls(kSpace, 1, kMany)}}};
    p[3] = {
        "o200k",
        R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
        {{not_cls(not_letter_number_newline, 0, 1), cls(upperish, 0, kMany), cls(lowerish, 1, kMany),
          contraction(true, 0)},
         {not_cls(not_letter_number_newline, 0, 1), cls(upperish, 1, kMany), cls(lowerish, 0, kMany),
          contraction(true, 0)},
         {cls(kNumber, 1, 3)},
         {cls(kBlank, 0, 1), not_cls(not_space_letter_number, 1, kMany), cls(kNewline | kSlash, 0, kMany)},
         {cls(kSpace, 0, kMany), cls(kNewline, 1, kMany)},
         {cls(kSpace, 1, kMany), not_before_nonspace()},
         {cls(kSpace, 1, kMany)}}};
    return p;
  }();
  return table;
}

const Pattern& pattern_of(PretokenizerPattern p) { return patterns()[static_cast<size_t>(p)]; }

Mask mask_of(uint32_t cp) {
  if (cp == kInvalidCodePoint) return bit(CharClass::other);
  Mask m = bit(char_class(cp));
  if (cp == '\r') m |= kCr;
  if (cp == '\n') m |= kLf;
  if (cp == ' ') m |= kBlank;
  if (cp == '/') m |= kSlash;
  return m;
}

// Matches one alternative at a time against decoded characters, with backtracking.
class Matcher {
 public:
  explicit Matcher(const std::vector<Char>& chars) : c_(chars), n_(chars.size()) {}
  static constexpr size_t kFail = ~size_t{0};

  // The end of the match of items[k..] at character i, or kFail.
  size_t match(const Alternative& items, size_t k, size_t i) const {
    if (k == items.size()) return i;
    const Item& it = items[k];
    switch (it.kind) {
      case Item::Kind::end_of_text: return i == n_ ? match(items, k + 1, i) : kFail;
      case Item::Kind::not_before_nonspace: return i == n_ || (c_[i].mask & kSpace) ? match(items, k + 1, i) : kFail;
      case Item::Kind::contraction: {
        if (const size_t len = contraction_length(i, it.case_insensitive)) {
          const size_t r = match(items, k + 1, i + len);
          if (r != kFail) return r;
        }
        return it.min == 0 ? match(items, k + 1, i) : kFail;
      }
      case Item::Kind::cls: {
        size_t run = 0;
        while (run < it.max && i + run < n_ && (((c_[i + run].mask & it.mask) != 0) != it.negate)) ++run;
        if (run < it.min) return kFail;
        if (it.possessive) return match(items, k + 1, i + run);
        for (size_t count = run + 1; count-- > it.min;) {
          const size_t r = match(items, k + 1, i + count);
          if (r != kFail) return r;
        }
        return kFail;
      }
    }
    return kFail;
  }

 private:
  bool is(size_t i, char lower, bool fold) const {
    if (i >= n_) return false;
    const uint32_t cp = c_[i].cp;
    if (cp == static_cast<uint32_t>(lower)) return true;
    if (!fold) return false;
    return cp == static_cast<uint32_t>(lower - 'a' + 'A') || (lower == 's' && cp == 0x17F);  // ſ folds to s
  }
  // 's 't 're 've 'm 'll 'd at i: their length in characters, or 0.
  size_t contraction_length(size_t i, bool fold) const {
    if (i >= n_ || c_[i].cp != '\'') return 0;
    for (char one : {'s', 't', 'm', 'd'}) {
      if (is(i + 1, one, fold)) return 2;
    }
    for (const char* two : {"re", "ve", "ll"}) {
      if (is(i + 1, two[0], fold) && is(i + 2, two[1], fold)) return 3;
    }
    return 0;
  }

  const std::vector<Char>& c_;
  size_t n_;
};

}  // namespace

std::string_view pattern_regex(PretokenizerPattern p) { return pattern_of(p).regex; }
std::string_view pattern_name(PretokenizerPattern p) { return pattern_of(p).name; }

std::optional<PretokenizerPattern> pattern_from_name(std::string_view name) {
  for (size_t i = 0; i < patterns().size(); ++i) {
    if (patterns()[i].name == name) return static_cast<PretokenizerPattern>(i);
  }
  return std::nullopt;
}

std::optional<PretokenizerPattern> pattern_from_regex(std::string_view regex) {
  for (size_t i = 0; i < patterns().size(); ++i) {
    if (patterns()[i].regex == regex) return static_cast<PretokenizerPattern>(i);
  }
  return std::nullopt;
}

void pretokenize(PretokenizerPattern pattern, std::string_view text, std::vector<std::string_view>& pieces) {
  thread_local std::vector<Char> chars;
  chars.clear();
  for (size_t pos = 0; pos < text.size();) {
    int len;
    const auto b = static_cast<unsigned char>(text[pos]);
    const uint32_t cp = b < 0x80 ? (len = 1, b) : decode_utf8(text, pos, &len);
    chars.push_back({cp, mask_of(cp), static_cast<uint32_t>(pos)});
    pos += static_cast<size_t>(len);
  }
  const Pattern& p = pattern_of(pattern);
  const Matcher matcher(chars);
  const size_t n = chars.size();
  for (size_t i = 0; i < n;) {
    size_t end = Matcher::kFail;
    for (const Alternative& a : p.alternatives) {
      end = matcher.match(a, 0, i);
      if (end != Matcher::kFail && end > i) break;
      end = Matcher::kFail;
    }
    if (end == Matcher::kFail) end = i + 1;  // unreachable with these patterns: every character matches
    const size_t begin_byte = chars[i].offset;
    const size_t end_byte = end < n ? chars[end].offset : text.size();
    pieces.push_back(text.substr(begin_byte, end_byte - begin_byte));
    i = end;
  }
}

}  // namespace linea::data

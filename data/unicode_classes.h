// The character classes that the pre-tokenization regexes of GPT-2, cl100k, o200k and LLaMA-3 tell
// apart (data/pretokenizer.h): the letter categories Lu, Ll, Lt, Lm, Lo (\p{L} is their union),
// marks \p{M}, numbers \p{N}, whitespace \s, and everything else (other), plus UTF-8 decoding of
// one code point. The ranges are generated from Python's `regex` module
// (scripts/gen_unicode_classes.py); the classes are disjoint.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace linea::data {

enum class CharClass : uint8_t { other, upper, lower, title, modifier, other_letter, mark, number, space };

struct CodePointRange {
  uint32_t lo, hi;  // inclusive
  CharClass cls;
};
extern const CodePointRange kCodePointRanges[];  // sorted, disjoint; unlisted code points are `other`
extern const int kNumCodePointRanges;

CharClass char_class(uint32_t code_point);

// Decodes the code point starting at text[pos] and stores its byte length in *length. Malformed
// UTF-8 (bad lead or continuation byte, overlong form, surrogate, > U+10FFFF, cut off at the end)
// decodes as kInvalidCodePoint with length 1, so every byte is consumed exactly once.
inline constexpr uint32_t kInvalidCodePoint = 0xFFFFFFFFu;
uint32_t decode_utf8(std::string_view text, size_t pos, int* length);

// Appends the UTF-8 encoding of a valid code point to `out`.
void append_utf8(uint32_t code_point, std::string& out);

}  // namespace linea::data

#include "data/gpt2_pretokenizer.h"

#include <cstdint>

#include "data/unicode_classes.h"

namespace linea::data {

namespace {

struct Char {
  uint32_t cp;
  CharClass cls;
  size_t offset;  // byte offset in the text
};

std::vector<Char> decode_chars(std::string_view text) {
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    int len;
    const uint32_t cp = decode_utf8(text, pos, &len);
    chars.push_back({cp, cp == kInvalidCodePoint ? CharClass::other : char_class(cp), pos});
    pos += static_cast<size_t>(len);
  }
  return chars;
}

// Length in characters of a contraction ('s 't 're 've 'm 'll 'd) starting at i, or 0.
size_t contraction_length(const std::vector<Char>& c, size_t i) {
  if (c[i].cp != '\'' || i + 1 >= c.size()) return 0;
  const uint32_t a = c[i + 1].cp;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= c.size()) return 0;
  const uint32_t b = c[i + 2].cp;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

}  // namespace

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  const std::vector<Char> c = decode_chars(text);
  const size_t n = c.size();
  std::vector<std::string_view> pieces;
  size_t i = 0;
  while (i < n) {
    size_t end;
    // Where a run of one class starts: after an optional single ' ' (the " ?" of three alternatives).
    const size_t run_start = (c[i].cp == ' ' && i + 1 < n && c[i + 1].cls != CharClass::space) ? i + 1 : i;
    if (const size_t k = contraction_length(c, i)) {
      end = i + k;  // 's|'t|'re|'ve|'m|'ll|'d
    } else if (c[run_start].cls != CharClass::space) {
      // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: the class of the first character decides.
      const CharClass cls = c[run_start].cls;
      end = run_start + 1;
      while (end < n && c[end].cls == cls) ++end;
    } else {
      // Whitespace run [i, e). `\s+(?!\S)` takes it all at the end of the text, else all but its
      // last character (which then leads the next piece); a single space before \S falls to `\s+`.
      size_t e = i + 1;
      while (e < n && c[e].cls == CharClass::space) ++e;
      end = (e == n || e - i == 1) ? e : e - 1;
    }
    const size_t begin_byte = c[i].offset;
    const size_t end_byte = end < n ? c[end].offset : text.size();
    pieces.push_back(text.substr(begin_byte, end_byte - begin_byte));
    i = end;
  }
  return pieces;
}

}  // namespace linea::data

#include "data/unicode_classes.h"

#include <algorithm>
#include <iterator>
#include <string>

namespace linea::data {

namespace {

// The class of every code point of the Basic Multilingual Plane, looked up once from the ranges.
struct BmpTable {
  CharClass cls[0x10000];
  BmpTable() {
    std::fill(std::begin(cls), std::end(cls), CharClass::other);
    for (int i = 0; i < kNumCodePointRanges && kCodePointRanges[i].lo < 0x10000; ++i) {
      const CodePointRange& r = kCodePointRanges[i];
      std::fill(cls + r.lo, cls + std::min<uint32_t>(r.hi, 0xFFFF) + 1, r.cls);
    }
  }
};

}  // namespace

CharClass char_class(uint32_t cp) {
  static const BmpTable bmp;
  if (cp < 0x10000) return bmp.cls[cp];
  const CodePointRange* end = kCodePointRanges + kNumCodePointRanges;
  const CodePointRange* it =
      std::upper_bound(kCodePointRanges, end, cp, [](uint32_t c, const CodePointRange& r) { return c < r.lo; });
  if (it == kCodePointRanges) return CharClass::other;
  --it;
  return cp <= it->hi ? it->cls : CharClass::other;
}

uint32_t decode_utf8(std::string_view text, size_t pos, int* length) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  *length = 1;
  if (lead < 0x80) return lead;
  int n;
  uint32_t cp;
  uint32_t min;
  if ((lead & 0xE0) == 0xC0) {
    n = 2, cp = lead & 0x1F, min = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    n = 3, cp = lead & 0x0F, min = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    n = 4, cp = lead & 0x07, min = 0x10000;
  } else {
    return kInvalidCodePoint;
  }
  if (pos + n > text.size()) return kInvalidCodePoint;
  for (int i = 1; i < n; ++i) {
    const unsigned char c = byte(pos + i);
    if ((c & 0xC0) != 0x80) return kInvalidCodePoint;
    cp = (cp << 6) | (c & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return kInvalidCodePoint;
  *length = n;
  return cp;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace linea::data

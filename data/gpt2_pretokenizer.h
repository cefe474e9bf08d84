// GPT-2's pre-tokenization: text is cut into pieces before BPE by the regex (encoder.py)
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// applied left to right, first alternative that matches wins. This is a hand-written matcher
// with the same result on every input (character classes from unicode_classes.h). Malformed
// UTF-8 bytes count as `other` characters, one byte each. Pieces cover the text exactly.
#pragma once
#include <string_view>
#include <vector>

namespace linea::data {

std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

}  // namespace linea::data

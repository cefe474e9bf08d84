// Pre-tokenization: byte-level BPE tokenizers cut the text into pieces with a regex before merging,
// trying the alternatives left to right at each position and taking the first that matches. These
// are the regexes of the tokenizers linea reads, as tiktoken and Hugging Face spell them:
//   gpt2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   cl100k  '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+
//           |\s++$|\s*[\r\n]|\s+(?!\S)|\s
//   llama3  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*
//           |\s*[\r\n]+|\s+(?!\S)|\s+            (also cl100k's before tiktoken 0.8)
//   o200k   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|…|'d)?
//           |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|…|'d)?
//           |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Each is a table of alternatives, each a sequence of quantified character classes (classes from
// unicode_classes.h), contractions, `$` and `(?!\S)`, matched by a small backtracking matcher with
// the regex's semantics (greedy, possessive where the regex says so). Case-insensitive
// contractions fold as Unicode simple case folding does ('s' also matches 'S' and U+017F 'ſ').
// Malformed UTF-8 bytes count as `other` characters, one byte each. Pieces cover the text exactly.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace linea::data {

enum class PretokenizerPattern : uint8_t { gpt2, cl100k, llama3, o200k };

// The regex a pattern follows, exactly as above (one line).
std::string_view pattern_regex(PretokenizerPattern pattern);
// "gpt2", "cl100k", "llama3", "o200k".
std::string_view pattern_name(PretokenizerPattern pattern);
std::optional<PretokenizerPattern> pattern_from_name(std::string_view name);
// The pattern whose regex is exactly `regex` (as a tokenizer.json Split holds it), if any.
std::optional<PretokenizerPattern> pattern_from_regex(std::string_view regex);

// Appends the pieces of `text` to `pieces` (views into `text`).
void pretokenize(PretokenizerPattern pattern, std::string_view text, std::vector<std::string_view>& pieces);

}  // namespace linea::data

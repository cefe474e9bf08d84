#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "data/atomic_file.h"
#include "data/gpt2_bpe_tokenizer.h"
#include "data/pretokenizer.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/unicode_classes.h"
#include "tests/testing/error_of.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tiny_gpt2_vocab.h"

namespace linea::data {
namespace {

using testing::error_of;

using testing::TempDir;

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// ---- GPT-2 pre-tokenization: expected pieces come from Python's `regex` module running GPT-2's
// pattern on the same strings.
TEST(Pretokenizer, Gpt2MatchesTheReferenceRegex) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"Hello world", {"Hello", " world"}},
      {"I'm here, they're   ok!", {"I", "'m", " here", ",", " they", "'re", "  ", " ok", "!"}},
      {"  leading", {" ", " leading"}},
      {"trailing  ", {"trailing", "  "}},
      {"a\n\nb", {"a", "\n", "\n", "b"}},
      {"x  \n  y", {"x", "  \n ", " y"}},
      {"'sun 'LL 'll", {"'s", "un", " '", "LL", " '", "ll"}},
      {"100 apples\tand \u00bd 2\u00b2", {"100", " apples", "\t", "and", " \u00bd", " 2\u00b2"}},
      {"na\u00efve caf\u00e9 \u2014 \u6771\u4eac 123",
       {"na\u00efve", " caf\u00e9", " \u2014", " \u6771\u4eac", " 123"}},
      {"end with space ", {"end", " with", " space", " "}},
      {" ", {" "}},
      {"\u00a0nbsp\u3000ideographic", {"\u00a0", "nbsp", "\u3000", "ideographic"}},
      {"tab\t\tx", {"tab", "\t", "\t", "x"}},
      {"don't!!! ?? ...x", {"don", "'t", "!!!", " ??", " ...", "x"}},
  };
  for (const auto& [text, expected] : cases) {
    std::vector<std::string_view> pieces;
    pretokenize(PretokenizerPattern::gpt2, text, pieces);
    EXPECT_EQ(std::vector<std::string>(pieces.begin(), pieces.end()), expected) << "text: " << text;
  }
}

TEST(Pretokenizer, Gpt2MalformedUtf8BytesAreKeptOneByOne) {
  const std::string text = "ab\xff\xfe cd\xc3";  // invalid bytes and a cut-off 2-byte sequence
  std::vector<std::string_view> pieces;
  pretokenize(PretokenizerPattern::gpt2, text, pieces);
  std::string joined;
  for (auto p : pieces) joined += p;
  EXPECT_EQ(joined, text);
  EXPECT_EQ(std::vector<std::string>(pieces.begin(), pieces.end()),
            (std::vector<std::string>{"ab", "\xff\xfe", " cd", "\xc3"}));
}

TEST(UnicodeClasses, SampleCodePoints) {
  EXPECT_EQ(char_class('a'), CharClass::lower);
  EXPECT_EQ(char_class('Q'), CharClass::upper);
  EXPECT_EQ(char_class(0x00E9), CharClass::lower);         // é
  EXPECT_EQ(char_class(0x6771), CharClass::other_letter);  // 東
  EXPECT_EQ(char_class(0x01C5), CharClass::title);         // ǅ
  EXPECT_EQ(char_class(0x02B0), CharClass::modifier);      // ʰ
  EXPECT_EQ(char_class(0x0301), CharClass::mark);          // combining acute
  EXPECT_EQ(char_class(0x1D400), CharClass::upper);        // 𝐀, beyond the BMP
  EXPECT_EQ(char_class(0x0915), CharClass::other_letter);  // क
  EXPECT_EQ(char_class(0x00BD), CharClass::number);        // ½
  EXPECT_EQ(char_class(0x0663), CharClass::number);        // Arabic-Indic three
  EXPECT_EQ(char_class(0x3000), CharClass::space);         // ideographic space
  EXPECT_EQ(char_class(0x001C), CharClass::other);         // \s does not include the file separator
  EXPECT_EQ(char_class(0x2014), CharClass::other);         // em dash
  int len;
  EXPECT_EQ(decode_utf8("\xe6\x9d\xb1", 0, &len), 0x6771u);
  EXPECT_EQ(len, 3);
  EXPECT_EQ(decode_utf8("\xc0\x80", 0, &len), kInvalidCodePoint);  // overlong
  EXPECT_EQ(len, 1);
}

// ---- GPT-2 BPE on a tiny hand-written vocabulary.
TEST(Gpt2ByteToUnicode, KnownValues) {
  const auto& m = gpt2_byte_to_unicode();
  EXPECT_EQ(m['a'], static_cast<uint32_t>('a'));
  EXPECT_EQ(m['!'], static_cast<uint32_t>('!'));
  EXPECT_EQ(m[0x00], 0x100u);
  EXPECT_EQ(m['\n'], 0x10Au);  // Ċ
  EXPECT_EQ(m[' '], 0x120u);   // Ġ
  EXPECT_EQ(m[0x7F], 0x121u);
  EXPECT_EQ(m[0xAD], 0x143u);  // soft hyphen, the last byte remapped
  EXPECT_EQ(m[0xE9], 0xE9u);
}

class TinyGpt2 : public ::testing::Test {
 protected:
  void SetUp() override { testing::write_tiny_gpt2_vocab(dir.path()); }
  TempDir dir;
};

TEST_F(TinyGpt2, EncodesByMergeRank) {
  Gpt2BpeTokenizer tok(dir.path());
  EXPECT_EQ(tok.vocab_size(), 264);
  EXPECT_EQ(tok.eos_id(), 263);
  // "the" → t|he (no "t he" merge); " cat" → Ġ c a t → Ġ c at → Ġ cat → Ġcat.
  EXPECT_EQ(tok.encode("the cat"), (std::vector<int32_t>{'t', 257, 261}));
  // " the" → Ġt h e (rank 0) → Ġt he (rank 1) → Ġthe (rank 2).
  EXPECT_EQ(tok.encode(" the"), (std::vector<int32_t>{258}));
  // "hehehe" → he he he → every adjacent (he, he) left to right: hehe he.
  EXPECT_EQ(tok.encode("hehehe"), (std::vector<int32_t>{262, 257}));
  // Special tokens in text are plain text: "<|", "endoftext", "|>" byte by byte (no merge applies).
  EXPECT_EQ(tok.encode("<|endoftext|>").size(), 13u);
  EXPECT_EQ(tok.encode("\xc3\xa9\n"), (std::vector<int32_t>{0xC3, 0xA9, '\n'}));
}

TEST_F(TinyGpt2, DecodeInvertsEncodeOnAnyBytes) {
  Gpt2BpeTokenizer tok(dir.path());
  const std::string text = "the cat sat on the hehe mat.\n\n  caf\xc3\xa9 \xff\xfe\x00 end  ";
  const std::string with_nul(text.data(), text.size());
  EXPECT_EQ(tok.decode(tok.encode(with_nul)), with_nul);
  const int32_t eos = tok.eos_id();
  EXPECT_EQ(tok.decode(std::vector<int32_t>{eos}), "<|endoftext|>");
  EXPECT_THROW(tok.decode(std::vector<int32_t>{tok.vocab_size()}), std::out_of_range);
}

TEST_F(TinyGpt2, MalformedFilesNameTheFile) {
  write_text(dir / "merges.txt", "#version: 0.2\n\u0120 t\nh e x\n");
  EXPECT_NE(error_of([&] { Gpt2BpeTokenizer t(dir.path()); }).find("merges.txt line 3"), std::string::npos);
  write_text(dir / "merges.txt", "q z\n");
  EXPECT_NE(error_of([&] { Gpt2BpeTokenizer t(dir.path()); }).find("\"qz\" is not in"), std::string::npos);
  write_text(dir / "vocab.json", "{\"a\": 0,");
  EXPECT_NE(error_of([&] { Gpt2BpeTokenizer t(dir.path()); }).find("vocab.json: not valid JSON"), std::string::npos);
  write_text(dir / "vocab.json", "{\"a\": 0, \"<|endoftext|>\": 1}");
  EXPECT_NE(error_of([&] { Gpt2BpeTokenizer t(dir.path()); }).find("vocab.json: no token for byte 0"),
            std::string::npos);
  write_text(dir / "vocab.json", "{\"a\": 0, \"b\": 0}");
  EXPECT_NE(error_of([&] { Gpt2BpeTokenizer t(dir.path()); }).find("each used once"), std::string::npos);
  std::filesystem::remove(dir / "vocab.json");
  EXPECT_NE(error_of([&] { Gpt2BpeTokenizer t(dir.path()); }).find("vocab.json"), std::string::npos);
}

// ---- SentencePiece: train on a tiny corpus, round trip, save and reload.
std::vector<std::string> tiny_corpus() {
  const std::vector<std::string> subjects = {"the cat", "a dog", "my neighbour", "the old sailor", "every child"};
  const std::vector<std::string> verbs = {"sees", "likes", "paints", "remembers", "follows"};
  const std::vector<std::string> objects = {"the river", "a red boat", "the northern lights", "seven apples",
                                            "the quiet harbour"};
  std::vector<std::string> sentences;
  for (const auto& s : subjects) {
    for (const auto& v : verbs) {
      for (const auto& o : objects) sentences.push_back(s + " " + v + " " + o + ".");
    }
  }
  return sentences;
}

TEST(SentencePiece, TrainEncodeDecodeRoundTrip) {
  SentencePieceTrainOptions options;
  options.vocab_size = 320;
  const std::string model = train_sentencepiece(tiny_corpus(), options);
  SentencePieceTokenizer tok(model, "trained model");
  EXPECT_GT(tok.vocab_size(), 259);
  EXPECT_LE(tok.vocab_size(), 320);
  EXPECT_EQ(tok.eos_id(), 2);
  for (const auto& s : tiny_corpus()) EXPECT_EQ(tok.decode(tok.encode(s)), s);
  // Text the model never saw (newlines, repeated spaces, non-Latin script) survives via byte fallback.
  const std::string unseen = "Zebras  \u6771\u4eac\n\n\tquietly 2024 \u00bd";
  const auto ids = tok.encode(unseen);
  EXPECT_EQ(tok.decode(ids), unseen);
  // Words from the corpus take fewer tokens than bytes.
  const std::string seen = "the old sailor remembers the northern lights.";
  EXPECT_LT(tok.encode(seen).size(), seen.size() * 2 / 3);

  // Same model through a file and load_tokenizer().
  TempDir dir;
  write_file_atomically(dir / "m.model", tok.serialized_model());
  const auto loaded = load_tokenizer({"sentencepiece", "m.model"}, dir.path());
  EXPECT_EQ(loaded->encode(unseen), ids);
  // Training is deterministic.
  EXPECT_EQ(train_sentencepiece(tiny_corpus(), options), model);
}

TEST(SentencePiece, MalformedModelNamesTheFile) {
  TempDir dir;
  write_text(dir / "bad.model", "this is not a protobuf");
  EXPECT_NE(error_of([&] { SentencePieceTokenizer t(dir / "bad.model"); }).find("bad.model"), std::string::npos);
  EXPECT_NE(error_of([&] { SentencePieceTokenizer t(dir / "missing.model"); }).find("missing.model"),
            std::string::npos);
  EXPECT_NE(error_of([&] { load_tokenizer({"wordpiece", "x"}); }).find("unknown tokenizer kind"), std::string::npos);
}

}  // namespace
}  // namespace linea::data

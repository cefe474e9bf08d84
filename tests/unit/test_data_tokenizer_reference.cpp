// linea's tiktoken and tokenizer.json tokenizers against the reference libraries: the ids that
// tiktoken and Hugging Face tokenizers gave for the committed multilingual corpus
// (tests/data/tokenizer, written by tests/data/make_fixtures.py) must come out exactly.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/atomic_file.h"
#include "data/compressed_file_reader.h"
#include "data/hf_tokenizer.h"
#include "data/pretokenizer.h"
#include "data/tiktoken_tokenizer.h"
#include "tests/testing/error_of.h"
#include "tests/testing/fixtures.h"
#include "tests/testing/temp_dir.h"

namespace linea::data {
namespace {

using nlohmann::json;
using testing::error_of;

std::filesystem::path tokenizer_dir() { return testing::fixture_dir() / "tokenizer"; }

const json& expected() {
  static const json e = json::parse(read_decompressed(tokenizer_dir() / "expected_ids.json.gz"));
  return e;
}

std::vector<std::string> corpus() {
  return json::parse(read_file(tokenizer_dir() / "corpus.json")).get<std::vector<std::string>>();
}

void expect_reference_ids(const Tokenizer& tok, const std::string& encoding) {
  ASSERT_TRUE(expected()["encodings"].contains(encoding)) << encoding;
  const json& want = expected()["encodings"][encoding];
  const auto docs = corpus();
  ASSERT_EQ(want.size(), docs.size());
  size_t ids = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    const auto got = tok.encode(docs[i]);
    EXPECT_EQ(got, want[i].get<std::vector<int32_t>>()) << encoding << ", document " << i << ": " << docs[i];
    // Byte-level BPE decodes to the text, with the space a ByteLevel add_prefix_space put in front;
    // a SentencePiece-style decode drops the leading space it prepends (as tokenizers' decoders
    // do), so a text that starts with a space comes back without it.
    const bool prefix_space = encoding.find("prefix_space") != std::string::npos && docs[i].front() != ' ';
    if (encoding.find("_sp_") == std::string::npos || docs[i].front() != ' ') {
      EXPECT_EQ(tok.decode(got), (prefix_space ? " " : "") + docs[i]) << encoding << ", document " << i;
    }
    ids += got.size();
  }
  EXPECT_GT(ids, 1000u);
}

TEST(TiktokenReference, RegexesAreTiktokens) {
  for (const auto& [name, regex] : expected()["patterns"].items()) {
    const auto pattern = pattern_from_name(name);
    ASSERT_TRUE(pattern) << name;
    EXPECT_EQ(pattern_regex(*pattern), regex.get<std::string>()) << name;
  }
}

TEST(TiktokenReference, IdsEqualTiktokens) {
  for (const char* variant : {"cl100k", "o200k", "llama3"}) {
    const TiktokenTokenizer tok(tokenizer_dir() / "ranks.tiktoken", pattern_from_name(variant));
    const std::string encoding = std::string("tiktoken_") + variant;
    expect_reference_ids(tok, encoding);
    // The reference Encoding had two special tokens after the n ranks (n + 1 is <|endoftext|>, or
    // n and n + 1 LLaMA-3's): linea adds the encoding's whole set.
    const int32_t n = expected()["vocab_sizes"][encoding].get<int32_t>() - 2;
    const bool llama3 = std::string(variant) == "llama3";
    EXPECT_EQ(tok.vocab_size(), n + (llama3 ? 256 : 21));
    EXPECT_EQ(tok.eos_id(), llama3 ? n : n + 1);
  }
}

TEST(TiktokenReference, SpecialTokensAndVariants) {
  const TiktokenTokenizer tok(tokenizer_dir() / "ranks.tiktoken", PretokenizerPattern::cl100k);
  EXPECT_EQ(tok.decode(std::vector<int32_t>{tok.eos_id()}), "<|endoftext|>");
  EXPECT_EQ(tok.kind(), "tiktoken-cl100k");
  const std::string message = error_of([&] { TiktokenTokenizer t(tokenizer_dir() / "ranks.tiktoken", std::nullopt); });
  EXPECT_NE(message.find("tiktoken:PATH:cl100k"), std::string::npos) << message;
}

TEST(TiktokenReference, MalformedRankFilesNameTheLine) {
  const testing::TempDir dir;
  const auto write = [&](const std::string& text) {
    write_file_atomically(dir / "bad.tiktoken", text);
    return dir / "bad.tiktoken";
  };
  EXPECT_NE(error_of([&] {
              TiktokenTokenizer t(write("QQ== 0\nQg== x\n"), PretokenizerPattern::cl100k);
            }).find("bad.tiktoken line 2: expected \"BASE64 RANK\""),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              TiktokenTokenizer t(write("QQ== 0\nQg== 2\n"), PretokenizerPattern::cl100k);
            }).find("rank 1 is missing"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              TiktokenTokenizer t(write("QQ== 0\nQg== 0\n"), PretokenizerPattern::cl100k);
            }).find("rank 0 appears twice"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              TiktokenTokenizer t(write("QQ== 0\n"), PretokenizerPattern::cl100k);
            }).find("no token for the byte 0"),
            std::string::npos);
}

TEST(HfTokenizerReference, IdsEqualHuggingFaces) {
  for (const auto& [name, file] : expected()["files"].items()) {
    if (name == "tiktoken") continue;
    SCOPED_TRACE(name);
    const HfTokenizer tok(tokenizer_dir() / file.get<std::string>());
    EXPECT_EQ(tok.byte_level(), name.find("_sp_") == std::string::npos);
    expect_reference_ids(tok, name);
    EXPECT_EQ(tok.vocab_size(), expected()["vocab_sizes"][name].get<int32_t>());
  }
  EXPECT_GE(expected()["files"].size(), 7u);
}

TEST(HfTokenizerReference, DocumentSeparator) {
  const HfTokenizer bytes(tokenizer_dir() / "hf_bytelevel.json");
  EXPECT_EQ(bytes.decode(std::vector<int32_t>{bytes.eos_id()}), "<|endoftext|>");
  const HfTokenizer sp(tokenizer_dir() / "hf_sp_bpe.json");
  EXPECT_EQ(sp.decode(std::vector<int32_t>{sp.eos_id()}), "</s>");
}

TEST(HfTokenizerReference, UnsupportedFieldsAreNamed) {
  const testing::TempDir dir;
  const json base = json::parse(read_file(tokenizer_dir() / "hf_bytelevel.json"));
  const auto message_for = [&](const std::function<void(json&)>& edit) {
    json d = base;
    edit(d);
    write_file_atomically(dir / "tokenizer.json", d.dump());
    return error_of([&] { HfTokenizer t(dir / "tokenizer.json"); });
  };
  EXPECT_NE(
      message_for([](json& d) { d["model"]["type"] = "WordPiece"; }).find("field 'model.type': unsupported model"),
      std::string::npos);
  EXPECT_NE(message_for([](json& d) { d["model"]["dropout"] = 0.1; }).find("BPE dropout"), std::string::npos);
  EXPECT_NE(message_for([](json& d) {
              d["normalizer"] = {{"type", "NFKC"}};
            }).find("unsupported normalizer \"NFKC\""),
            std::string::npos);
  EXPECT_NE(message_for([](json& d) {
              d["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\d+"}}}, {"behavior", "Isolated"}};
            }).find("field 'pre_tokenizer.pattern.Regex': unsupported regex"),
            std::string::npos);
  EXPECT_NE(message_for([](json& d) { d["model"]["merges"][0] = "nosuchtoken x"; }).find("model.merges[0]"),
            std::string::npos);
  EXPECT_NE(message_for([](json& d) {
              d["added_tokens"] = json::array();
              d["model"]["vocab"]["<|other|>"] = d["model"]["vocab"]["<|endoftext|>"];
              d["model"]["vocab"].erase("<|endoftext|>");
            }).find("no document separator"),
            std::string::npos);
}

}  // namespace
}  // namespace linea::data

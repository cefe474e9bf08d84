// A short training run for the tests of evaluation on a trained model, during training ([eval])
// and after it (`linea eval`, `score`, `generate`), on a corpus of its own so that it needs nothing
// outside the repository (no default corpus): make_text_corpus writes generated English-like
// paragraphs, tokenized with the fixture byte-level BPE (tests/data/tokenizer/hf_bytelevel.json,
// vocabulary 900) into shards whose manifest names that tokenizer. eval_run_config: AdamW, 4
// sequences of 64 tokens a step, one val batch at the end, a checkpoint after the last step; with
// `eval_every` > 0 an [eval] table of arc_easy and lambada_openai (the fixtures of tests/data/eval)
// and niah_single_1 at 512 tokens, 2 items each, every `eval_every` steps.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "data/document_source.h"
#include "data/prepare.h"
#include "tests/testing/fixtures.h"

namespace linea::testing {

inline constexpr int64_t kTextCorpusVocab = 900;

// WORK/corpus.txt (600 paragraphs of 3 to 8 sentences "the <adjective> <noun> <verb> the <noun>
// near the <place>.", words drawn by a fixed generator) and its shards in WORK/corpus/, the first
// 20 paragraphs the val split; returns WORK/corpus.
inline std::filesystem::path make_text_corpus(const std::filesystem::path& work) {
  const std::vector<std::string> adjectives = {"quiet", "red", "old", "small", "bright", "tired", "clever", "cold"};
  const std::vector<std::string> nouns = {"cat", "river", "farmer", "lantern", "child", "boat", "bird", "teacher"};
  const std::vector<std::string> verbs = {"sees", "follows", "carries", "finds", "paints", "hears", "keeps", "meets"};
  const std::vector<std::string> places = {"harbour", "garden", "mill", "bridge", "market", "forest", "school", "hill"};
  uint32_t x = 12345;
  const auto pick = [&x](const std::vector<std::string>& words) {
    x = x * 1103515245u + 12345u;
    return words[(x >> 16) % words.size()];
  };
  std::filesystem::create_directories(work);
  const std::filesystem::path text = work / "corpus.txt";
  {
    std::ofstream out(text);
    for (int p = 0; p < 600; ++p) {
      for (int s = 0, n = 3 + p % 6; s < n; ++s) {
        out << (s ? " " : "") << "the " << pick(adjectives) << " " << pick(nouns) << " " << pick(verbs) << " the "
            << pick(nouns) << " near the " << pick(places) << ".";
      }
      out << "\n\n";
    }
  }
  data::PrepareOptions options;
  options.output = work / "corpus";
  options.tokenizer =
      data::TokenizerChoice::parse("hf:" + (fixture_dir() / "tokenizer" / "hf_bytelevel.json").string());
  options.val_docs = 20;
  options.progress = false;
  data::prepare_corpus([text] { return std::make_unique<data::FileDocumentSource>(std::vector{text}); }, options);
  return options.output;
}

struct EvalRun {
  std::string name;
  std::string model;  // the [model] tables, vocabulary kTextCorpusVocab
  std::string data;   // make_text_corpus's directory
  std::string device = "cpu";
  std::string precision = "auto";
  int64_t steps = 12;
  int64_t eval_every = 0;  // 0: no [eval] table
};

// The tasks of the [eval] table, as `linea eval --tasks` and the log name them.
inline constexpr const char* kEvalRunTasks = "arc_easy,lambada_openai,niah_single_1";

inline std::string eval_run_config(const EvalRun& r) {
  std::string text =
      "device = \"" + r.device + "\"\n[run]\nname = \"" + r.name + "\"\n" + r.model +
      "[optimizer]\nkind = \"adamw\"\nlr = 3e-3\nwarmup_steps = 2\n[train]\nsteps = " + std::to_string(r.steps) +
      "\nbatch_seqs = 4\nseq_len = 64\neval_every = 0\neval_batches = 1\ncheckpoint_every = " +
      std::to_string(r.steps) + "\nthreads = 2\nprecision = \"" + r.precision + "\"\n[data]\npath = \"" + r.data +
      "\"\n";
  if (r.eval_every > 0) {
    text += "[eval]\ntasks = [\"arc_easy\", \"lambada_openai\", \"niah_single_1\"]\nevery = " +
            std::to_string(r.eval_every) + "\nlimit = 2\ndata_dir = \"" + (fixture_dir() / "eval").string() +
            "\"\ncontext_lengths = [512]\n";
  }
  return text;
}

}  // namespace linea::testing

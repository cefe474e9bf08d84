// The embedded default corpus: the GNU Collaborative International Dictionary of English from
// Debian's dict-gcide package (/usr/share/dictd/gcide.{index,dict.dz}), so a fresh machine with no
// network has real English text to train on. ensure_default_corpus(), on first use:
//   1. reads the dictionary; every entry (a headword's block: pronunciation, part of speech,
//      definitions, quotations, etymology) is one document, cleaned by gcide_document();
//   2. orders the documents by a fixed pseudo-random permutation, so the tokenizer's training
//      sample and the val split (every 100th document) spread over the whole alphabet;
//   3. runs prepare_corpus() with a SentencePiece BPE model of 4096 pieces trained on a 4 MB
//      sample (BPE trains several times faster than unigram here, for the same bytes per token).
// The corpus lives in $LINEA_CACHE/gcide-spm4096 (default ~/.cache/linea/gcide-spm4096); it is
// built in a sibling partial directory and renamed into place, so a later call (or a concurrent
// one that lost the race) finds it ready. The whole dictionary: 126 k documents, 31 MB of text,
// 11.56 M tokens (11.44 M train, 0.12 M val; 2.7 bytes of text per token), built with about 20 s
// of CPU time (BPE training about 4 s; bench/bench_data.cpp measures it).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace linea::data {

struct DefaultCorpusOptions {
  std::filesystem::path dir;  // empty: default_corpus_dir()
  std::filesystem::path index_file = "/usr/share/dictd/gcide.index";
  std::filesystem::path dict_file = "/usr/share/dictd/gcide.dict.dz";
  int vocab_size = 4096;
  int64_t spm_sample_bytes = 4 << 20;
  int64_t max_documents = 0;  // 0: the whole dictionary (tests build a small one)
  int threads = 1;
  bool progress = true;
};

// An entry as a document: lines that only cite the source ("[1913 Webster]", "[WordNet 1.5]")
// dropped, wrapped lines joined with single spaces, runs of spaces collapsed, and each blank-line
// paragraph break kept as one '\n'.
std::string gcide_document(std::string_view entry);

// $LINEA_CACHE/gcide-spm4096, else $HOME/.cache/linea/gcide-spm4096.
std::filesystem::path default_corpus_dir();

// Returns the corpus directory, building it first if it has no manifest.json.
std::filesystem::path ensure_default_corpus(const DefaultCorpusOptions& options);

}  // namespace linea::data

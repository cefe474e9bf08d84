#include "data/default_corpus.h"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/dictd_database.h"
#include "data/index_permutation.h"
#include "data/manifest.h"
#include "data/prepare.h"

namespace linea::data {

namespace {

constexpr uint64_t kDocumentOrderSeed = 0;
constexpr double kValFraction = 0.01;

class DictionaryDocuments : public DocumentSource {
 public:
  DictionaryDocuments(const DictdDatabase& db, int64_t max_documents)
      : db_(db),
        order_(db.entries().size(), kDocumentOrderSeed),
        count_(max_documents > 0 ? std::min<uint64_t>(max_documents, db.entries().size()) : db.entries().size()) {}
  bool next(std::string& doc) override {
    do {
      if (next_ == count_) return false;
      doc = gcide_document(db_.text(db_.entries()[order_(next_++)]));
    } while (doc.empty());
    return true;
  }

 private:
  const DictdDatabase& db_;
  IndexPermutation order_;
  uint64_t count_;
  uint64_t next_ = 0;
};

// "[1913 Webster]", "[Webster 1913 Suppl.]", "[WordNet 1.5 +PJC]", "[PJC]", "[Century Dict. 1906]"...
bool is_source_citation(std::string_view line) {
  if (line.size() < 2 || line.front() != '[' || line.find(']') != line.size() - 1) return false;
  for (const char* source : {"Webster", "WordNet", "PJC", "Century"}) {
    if (line.find(source) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

std::string gcide_document(std::string_view entry) {
  std::string doc;
  bool paragraph_break = false;
  while (!entry.empty()) {
    const size_t newline = entry.find('\n');
    std::string_view line = entry.substr(0, newline);
    entry.remove_prefix(newline == std::string_view::npos ? entry.size() : newline + 1);
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) {
      paragraph_break = true;
      continue;
    }
    line = line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
    if (is_source_citation(line)) continue;
    if (!doc.empty()) doc += paragraph_break ? '\n' : ' ';
    paragraph_break = false;
    for (char c : line) {
      if (c == '\t') c = ' ';
      if (c != ' ' || doc.back() != ' ') doc += c;
    }
  }
  return doc;
}

std::filesystem::path default_corpus_dir() {
  const std::string name = "gcide-spm4096";
  if (const char* cache = std::getenv("LINEA_CACHE"); cache && *cache) return std::filesystem::path(cache) / name;
  const char* home = std::getenv("HOME");
  if (!home || !*home) throw std::runtime_error("default corpus: neither $LINEA_CACHE nor $HOME is set");
  return std::filesystem::path(home) / ".cache" / "linea" / name;
}

std::filesystem::path ensure_default_corpus(const DefaultCorpusOptions& options) {
  const std::filesystem::path dir = options.dir.empty() ? default_corpus_dir() : options.dir;
  if (std::filesystem::exists(dir / kManifestFile)) return dir;
  for (const auto& file : {options.index_file, options.dict_file}) {
    if (!std::filesystem::exists(file)) {
      throw std::runtime_error("default corpus: " + file.string() +
                               " is missing; install Debian's dict-gcide package (scripts/install-deps.sh)");
    }
  }
  if (options.progress)
    std::fprintf(stderr, "default corpus: building %s from %s\n", dir.c_str(), options.dict_file.c_str());
  const DictdDatabase db(options.index_file, options.dict_file);

  PrepareOptions prepare;
  prepare.output = dir;
  prepare.tokenizer.kind = TokenizerChoice::Kind::spm_train;
  prepare.tokenizer.vocab_size = options.vocab_size;
  prepare.spm_model_type = "bpe";
  prepare.spm_sample_bytes = options.spm_sample_bytes;
  prepare.val_fraction = kValFraction;
  prepare.threads = options.threads;
  prepare.shard_prefix = "gcide";
  prepare.progress = options.progress;
  try {
    prepare_corpus([&] { return std::make_unique<DictionaryDocuments>(db, options.max_documents); }, prepare);
  } catch (const std::exception&) {
    if (std::filesystem::exists(dir / kManifestFile)) return dir;  // another process built it meanwhile
    throw;
  }
  return dir;
}

}  // namespace linea::data

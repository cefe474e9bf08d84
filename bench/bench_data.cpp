// Data pipeline benchmark; prints JSON lines:
//   {"bench":"default_corpus", ...}  full GCIDE default-corpus build (tokenizer training + prepare)
//   {"bench":"spm_encode", ...}      single-thread SentencePiece encode speed on that text
//   {"bench":"loader", ...}          training micro-batches per second through data::Loader
// usage: bench_data [--threads N] [--dict-dir DIR (default /usr/share/dictd)] [--keep DIR]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "data/dataset.h"
#include "data/default_corpus.h"
#include "data/dictd_database.h"
#include "data/loader.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace linea::data;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::filesystem::path dict_dir = "/usr/share/dictd", keep;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads") {
      threads = std::atoi(argv[i + 1]);
    } else if (flag == "--dict-dir") {
      dict_dir = argv[i + 1];
    } else if (flag == "--keep") {
      keep = argv[i + 1];
    } else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  char pattern[] = "/tmp/bench-data-XXXXXX";
  const std::filesystem::path work = keep.empty() ? std::filesystem::path(::mkdtemp(pattern)) : keep;

  DefaultCorpusOptions corpus;
  corpus.dir = work / "gcide-spm4096";
  corpus.index_file = dict_dir / "gcide.index";
  corpus.dict_file = dict_dir / "gcide.dict.dz";
  corpus.threads = threads;
  corpus.progress = false;
  auto start = std::chrono::steady_clock::now();
  ensure_default_corpus(corpus);
  const double build_s = seconds_since(start);
  const auto ds = Dataset::open(corpus.dir);
  const int64_t train = ds->split(Split::train).num_tokens(), val = ds->split(Split::val).num_tokens();
  std::printf(
      "{\"bench\":\"default_corpus\",\"threads\":%d,\"seconds\":%.2f,\"train_tokens\":%lld,\"val_tokens\":%lld,"
      "\"vocab_size\":%lld}\n",
      threads, build_s, static_cast<long long>(train), static_cast<long long>(val),
      static_cast<long long>(ds->vocab_size()));

  // Single-thread encode speed on the cleaned dictionary text.
  const DictdDatabase db(corpus.index_file, corpus.dict_file);
  const auto tokenizer = ds->tokenizer();
  int64_t bytes = 0, tokens = 0;
  start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < db.entries().size(); i += 4) {
    const std::string doc = gcide_document(db.text(db.entries()[i]));
    bytes += static_cast<int64_t>(doc.size());
    tokens += static_cast<int64_t>(tokenizer->encode(doc).size());
  }
  const double encode_s = seconds_since(start);
  std::printf("{\"bench\":\"spm_encode\",\"threads\":1,\"mb_per_s\":%.2f,\"bytes_per_token\":%.3f}\n",
              static_cast<double>(bytes) / 1e6 / encode_s, static_cast<double>(bytes) / static_cast<double>(tokens));

  // Loader: T = 1024, 8 sequences per micro-batch.
  Loader loader(ds, {.seq_len = 1024, .global_batch_seqs = 8, .micro_batch_seqs = 8, .seed = 1});
  const int batches = 400;
  start = std::chrono::steady_clock::now();
  int64_t docs = 0;
  for (int i = 0; i < batches; ++i) docs += loader.next().layout.num_seqs();
  const double loader_s = seconds_since(start);
  std::printf(
      "{\"bench\":\"loader\",\"seq_len\":1024,\"micro_batch\":8,\"batches_per_s\":%.1f,\"tokens_per_s\":%.3g,"
      "\"sequences_per_batch\":%.1f}\n",
      batches / loader_s, batches * 8192.0 / loader_s, static_cast<double>(docs) / batches);
  if (keep.empty()) std::filesystem::remove_all(work);
  return 0;
}

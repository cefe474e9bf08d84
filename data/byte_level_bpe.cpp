#include "data/byte_level_bpe.h"

#include <atomic>
#include <stdexcept>

namespace linea::data {

namespace {

std::atomic<uint64_t> next_serial{1};

struct PieceCache {
  static constexpr size_t kMaxPieceBytes = 32;
  static constexpr size_t kMaxPieces = 1 << 16;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> ids;
};

}  // namespace

ByteLevelBpe::ByteLevelBpe(std::vector<std::string> token_bytes, const std::string& source)
    : token_bytes_(std::move(token_bytes)), serial_(next_serial++) {
  for (size_t id = 0; id < token_bytes_.size(); ++id) {
    if (!token_bytes_[id].empty()) id_of_.emplace(token_bytes_[id], static_cast<int32_t>(id));  // first id wins
  }
  for (int b = 0; b < 256; ++b) {
    const int32_t id = id_of(std::string(1, static_cast<char>(b)));
    if (id < 0) {
      throw std::runtime_error(source + ": no token for the byte " + std::to_string(b) +
                               "; a byte-level vocabulary must hold all 256");
    }
    byte_id_[static_cast<size_t>(b)] = id;
  }
}

int32_t ByteLevelBpe::id_of(std::string_view bytes) const {
  const auto it = id_of_.find(bytes);
  return it == id_of_.end() ? -1 : it->second;
}

void ByteLevelBpe::add_merge(std::string_view left, std::string_view right, int32_t rank, const std::string& where) {
  const std::string both = std::string(left) + std::string(right);
  const int32_t l = id_of(left), r = id_of(right), m = id_of(both);
  if (l < 0 || r < 0 || m < 0) {
    throw std::runtime_error(where + ": the merge's " +
                             (l < 0   ? "left part"
                              : r < 0 ? "right part"
                                      : "result") +
                             " is not in the vocabulary");
  }
  merges_.add(l, r, rank, m);
}

void ByteLevelBpe::add_merges_from_ranks() {
  for (size_t id = 0; id < token_bytes_.size(); ++id) {
    const std::string& t = token_bytes_[id];
    if (t.size() < 2 || id_of(t) != static_cast<int32_t>(id)) continue;
    for (size_t cut = 1; cut < t.size(); ++cut) {
      const int32_t l = id_of(std::string_view(t).substr(0, cut)), r = id_of(std::string_view(t).substr(cut));
      if (l >= 0 && r >= 0) merges_.add(l, r, static_cast<int32_t>(id), static_cast<int32_t>(id));
    }
  }
}

void ByteLevelBpe::encode_piece(std::string_view piece, bool whole_piece_lookup, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (piece.size() == 1) {
    out.push_back(byte_id_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (whole_piece_lookup) {
    if (const int32_t id = id_of(piece); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  thread_local PieceCache cache;
  const bool cacheable = piece.size() <= PieceCache::kMaxPieceBytes;
  if (cacheable) {
    if (cache.owner != serial_) {
      cache.ids.clear();
      cache.owner = serial_;
    }
    if (const auto it = cache.ids.find(piece); it != cache.ids.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  thread_local std::vector<int32_t> symbols;
  symbols.clear();
  for (char c : piece) symbols.push_back(byte_id_[static_cast<unsigned char>(c)]);
  merges_.merge(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    if (cache.ids.size() >= PieceCache::kMaxPieces) cache.ids.clear();
    cache.ids.emplace(std::string(piece), symbols);
  }
}

void ByteLevelBpe::decode(int32_t id, std::string& out) const {
  if (id < 0 || id >= vocab_size()) {
    throw std::out_of_range("decode: id " + std::to_string(id) + " outside [0, " + std::to_string(vocab_size()) + ")");
  }
  out += token_bytes_[static_cast<size_t>(id)];
}

}  // namespace linea::data

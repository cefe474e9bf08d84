#include "data/rle_bit_packed_decoder.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace linea::data {

RleBitPackedDecoder::RleBitPackedDecoder(const uint8_t* data, size_t size, int bit_width)
    : p_(data), end_(data + size), bit_width_(bit_width) {
  if (bit_width < 0 || bit_width > 32) {
    throw std::invalid_argument("RLE/bit-packed data: bit width " + std::to_string(bit_width) + " outside [0, 32]");
  }
}

void RleBitPackedDecoder::next_run() {
  uint64_t header = 0;
  for (int shift = 0;; shift += 7) {
    if (p_ == end_) throw std::runtime_error("RLE/bit-packed data ends before the values it should hold");
    if (shift > 28) throw std::runtime_error("RLE/bit-packed data: run header longer than 5 bytes");
    const uint8_t b = *p_++;
    header |= static_cast<uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) break;
  }
  const int64_t count = static_cast<int64_t>(header >> 1);
  if (count == 0) throw std::runtime_error("RLE/bit-packed data: an empty run");
  if ((header & 1) == 0) {
    const size_t bytes = static_cast<size_t>((bit_width_ + 7) / 8);
    if (static_cast<size_t>(end_ - p_) < bytes) throw std::runtime_error("RLE/bit-packed data: RLE run cut short");
    uint32_t v = 0;
    for (size_t i = 0; i < bytes; ++i) v |= static_cast<uint32_t>(p_[i]) << (8 * i);
    p_ += bytes;
    if (bit_width_ < 32 && (v >> bit_width_) != 0) {
      throw std::runtime_error("RLE/bit-packed data: RLE value " + std::to_string(v) + " wider than " +
                               std::to_string(bit_width_) + " bits");
    }
    rle_left_ = count;
    rle_value_ = v;
  } else {
    const int64_t values = count * 8;
    const size_t declared = static_cast<size_t>(count) * static_cast<size_t>(bit_width_);
    packed_ = p_;
    packed_bytes_ = std::min(declared, static_cast<size_t>(end_ - p_));
    p_ += packed_bytes_;
    packed_left_ = values;
    packed_next_ = 0;
  }
}

uint32_t RleBitPackedDecoder::packed_value(int64_t j) const {
  if (bit_width_ == 0) return 0;
  const uint64_t bit = static_cast<uint64_t>(j) * static_cast<uint64_t>(bit_width_);
  const size_t first = static_cast<size_t>(bit >> 3);
  const size_t last = static_cast<size_t>((bit + static_cast<uint64_t>(bit_width_) - 1) >> 3);
  if (last >= packed_bytes_) throw std::runtime_error("RLE/bit-packed data: bit-packed run cut short");
  uint64_t word = 0;
  for (size_t i = first; i <= last; ++i) word |= static_cast<uint64_t>(packed_[i]) << (8 * (i - first));
  const uint64_t mask = bit_width_ == 32 ? 0xFFFFFFFFull : (1ull << bit_width_) - 1;
  return static_cast<uint32_t>((word >> (bit & 7)) & mask);
}

void RleBitPackedDecoder::decode(uint32_t* out, int64_t n) {
  while (n > 0) {
    if (rle_left_ == 0 && packed_left_ == 0) next_run();
    if (rle_left_ > 0) {
      const int64_t k = std::min(n, rle_left_);
      std::fill(out, out + k, rle_value_);
      out += k;
      n -= k;
      rle_left_ -= k;
    } else {
      const int64_t k = std::min(n, packed_left_);
      for (int64_t i = 0; i < k; ++i) *out++ = packed_value(packed_next_++);
      n -= k;
      packed_left_ -= k;
    }
  }
}

}  // namespace linea::data

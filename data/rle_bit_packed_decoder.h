// RleBitPackedDecoder: parquet's RLE / bit-packing hybrid (Encodings.md, RLE = 3), the encoding of
// definition levels and dictionary indices. The data is a run of runs, each introduced by a ULEB-128
// varint header h:
//   h & 1 = 0: an RLE run of h >> 1 copies of one value stored in ceil(bit_width / 8) bytes, LE;
//   h & 1 = 1: a bit-packed run of (h >> 1) · 8 values, bit_width bits each, packed from the least
//              significant bit of each byte up (value j occupies bits [j·w, (j + 1)·w)).
// A last bit-packed run may be cut short by the end of the data; its values up to there are read.
// Bounds-checked: data that ends before the values asked for throws std::runtime_error.
#pragma once
#include <cstddef>
#include <cstdint>

namespace linea::data {

class RleBitPackedDecoder {
 public:
  // bit_width in [0, 32]; throws std::invalid_argument otherwise.
  RleBitPackedDecoder(const uint8_t* data, size_t size, int bit_width);
  // Decodes the next n values into out.
  void decode(uint32_t* out, int64_t n);

 private:
  void next_run();
  uint32_t packed_value(int64_t j) const;

  const uint8_t* p_;
  const uint8_t* end_;
  int bit_width_;
  int64_t rle_left_ = 0;
  uint32_t rle_value_ = 0;
  int64_t packed_left_ = 0;  // values of the current bit-packed run not yet read
  int64_t packed_next_ = 0;  // index of the next one within the run
  const uint8_t* packed_ = nullptr;
  size_t packed_bytes_ = 0;  // bytes of the run present in the data
};

}  // namespace linea::data

// ThriftCompactReader: a bounds-checked reader of Apache Thrift's compact protocol, the encoding of
// parquet's footer (FileMetaData) and page headers. The protocol:
//   a struct is a run of fields ended by a 0 byte; a field starts with one byte, the high nibble the
//   field-id delta from the previous field (1..15; 0: a zigzag varint i16 id follows) and the low
//   nibble the type (1/2 bool true/false, no payload; 3 i8; 4/5/6 i16/i32/i64 as zigzag ULEB-128
//   varints; 7 double, 8 little-endian bytes; 8 binary, varint length + bytes; 9/10 list/set;
//   11 map; 12 struct);
//   a list starts with one byte, the size in the high nibble (15: a varint size follows) and the
//   element type in the low one; bools in lists are one byte each.
// Every read checks the bytes left and the wire type; malformed or truncated input throws
// std::runtime_error saying what was expected at which byte offset. skip() nests at most 64 deep.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace linea::data {

enum class ThriftType : uint8_t {
  stop = 0,
  bool_true = 1,
  bool_false = 2,
  i8 = 3,
  i16 = 4,
  i32 = 5,
  i64 = 6,
  double_ = 7,
  binary = 8,
  list = 9,
  set = 10,
  map = 11,
  struct_ = 12,
};

class ThriftCompactReader {
 public:
  ThriftCompactReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  struct Field {
    int16_t id = 0;
    ThriftType type = ThriftType::stop;
  };
  // Reading a struct: begin_struct(), then next_field() until it returns false (the STOP byte),
  // reading or skip()ping each field's value, then end_struct().
  void begin_struct();
  bool next_field(Field& field);
  void end_struct();

  // The value of `field`, checked against its wire type.
  int32_t i32(const Field& field);
  int64_t i64(const Field& field);
  bool boolean(const Field& field);
  std::string_view binary(const Field& field);
  std::string string(const Field& field) { return std::string(binary(field)); }

  struct ListHeader {
    ThriftType element = ThriftType::stop;
    int64_t size = 0;
  };
  // The header of the list or set in `field`; its size is checked against the bytes left.
  ListHeader list(const Field& field);
  // One element of a list whose elements are binary.
  std::string_view list_binary(const ListHeader& list);

  void skip(ThriftType type) { skip(type, 0); }
  size_t offset() const { return pos_; }

 private:
  [[noreturn]] void fail(const std::string& what) const;
  void need(size_t bytes, const char* what) const;
  uint8_t byte();
  uint64_t varint();
  int64_t zigzag() {
    const uint64_t v = varint();
    return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
  }
  void expect(const Field& field, std::initializer_list<ThriftType> types, const char* what) const;
  void skip(ThriftType type, int depth);

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::vector<int16_t> last_ids_;  // the previous field id of each open struct
};

}  // namespace linea::data

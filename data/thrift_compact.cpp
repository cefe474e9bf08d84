#include "data/thrift_compact.h"

#include <stdexcept>

namespace linea::data {

namespace {

constexpr int kMaxDepth = 64;

const char* type_name(ThriftType t) {
  switch (t) {
    case ThriftType::stop: return "stop";
    case ThriftType::bool_true:
    case ThriftType::bool_false: return "bool";
    case ThriftType::i8: return "i8";
    case ThriftType::i16: return "i16";
    case ThriftType::i32: return "i32";
    case ThriftType::i64: return "i64";
    case ThriftType::double_: return "double";
    case ThriftType::binary: return "binary";
    case ThriftType::list: return "list";
    case ThriftType::set: return "set";
    case ThriftType::map: return "map";
    case ThriftType::struct_: return "struct";
  }
  return "unknown";
}

// The smallest encoding of one element of a list of `t`, to bound a list's size by the bytes left.
size_t min_element_bytes(ThriftType t) { return t == ThriftType::double_ ? 8 : 1; }

}  // namespace

void ThriftCompactReader::fail(const std::string& what) const {
  throw std::runtime_error("thrift compact data, byte " + std::to_string(pos_) + " of " + std::to_string(size_) + ": " +
                           what);
}

void ThriftCompactReader::need(size_t bytes, const char* what) const {
  if (bytes > size_ - pos_) fail(std::string("truncated: ") + what + " needs " + std::to_string(bytes) + " bytes");
}

uint8_t ThriftCompactReader::byte() {
  need(1, "a byte");
  return data_[pos_++];
}

uint64_t ThriftCompactReader::varint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    const uint8_t b = byte();
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) return v;
  }
  fail("varint longer than 10 bytes");
}

void ThriftCompactReader::begin_struct() {
  if (last_ids_.size() >= kMaxDepth) fail("structs nested more than " + std::to_string(kMaxDepth) + " deep");
  last_ids_.push_back(0);
}

void ThriftCompactReader::end_struct() { last_ids_.pop_back(); }

bool ThriftCompactReader::next_field(Field& field) {
  const uint8_t header = byte();
  if (header == 0) return false;
  const int delta = header >> 4;
  const int type = header & 0x0F;
  if (type > static_cast<int>(ThriftType::struct_)) fail("unknown field type " + std::to_string(type));
  int64_t id = delta != 0 ? last_ids_.back() + delta : zigzag();
  if (id < 0 || id > INT16_MAX) fail("field id " + std::to_string(id) + " out of range");
  field.id = static_cast<int16_t>(id);
  field.type = static_cast<ThriftType>(type);
  last_ids_.back() = field.id;
  return true;
}

void ThriftCompactReader::expect(const Field& field, std::initializer_list<ThriftType> types, const char* what) const {
  for (ThriftType t : types) {
    if (field.type == t) return;
  }
  fail("field " + std::to_string(field.id) + ": expected " + what + ", got " + type_name(field.type));
}

int32_t ThriftCompactReader::i32(const Field& field) {
  expect(field, {ThriftType::i32, ThriftType::i16, ThriftType::i8}, "an i32");
  if (field.type == ThriftType::i8) return static_cast<int8_t>(byte());
  const int64_t v = zigzag();
  if (v < INT32_MIN || v > INT32_MAX) fail("field " + std::to_string(field.id) + ": i32 value out of range");
  return static_cast<int32_t>(v);
}

int64_t ThriftCompactReader::i64(const Field& field) {
  expect(field, {ThriftType::i64, ThriftType::i32, ThriftType::i16, ThriftType::i8}, "an i64");
  if (field.type == ThriftType::i8) return static_cast<int8_t>(byte());
  return zigzag();
}

bool ThriftCompactReader::boolean(const Field& field) {
  expect(field, {ThriftType::bool_true, ThriftType::bool_false}, "a bool");
  return field.type == ThriftType::bool_true;
}

std::string_view ThriftCompactReader::binary(const Field& field) {
  expect(field, {ThriftType::binary}, "a binary");
  const uint64_t n = varint();
  need(n, "a binary value");
  const std::string_view v(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
  pos_ += static_cast<size_t>(n);
  return v;
}

ThriftCompactReader::ListHeader ThriftCompactReader::list(const Field& field) {
  expect(field, {ThriftType::list, ThriftType::set}, "a list");
  const uint8_t header = byte();
  ListHeader h;
  const int type = header & 0x0F;
  if (type == 0 || type > static_cast<int>(ThriftType::struct_)) {
    fail("unknown list element type " + std::to_string(type));
  }
  h.element = static_cast<ThriftType>(type);
  uint64_t n = header >> 4;
  if (n == 15) n = varint();
  if (n > (size_ - pos_) / min_element_bytes(h.element)) {
    fail("list of " + std::to_string(n) + " elements is longer than the " + std::to_string(size_ - pos_) +
         " bytes left");
  }
  h.size = static_cast<int64_t>(n);
  return h;
}

std::string_view ThriftCompactReader::list_binary(const ListHeader& list) { return binary(Field{0, list.element}); }

void ThriftCompactReader::skip(ThriftType type, int depth) {
  if (depth > kMaxDepth) fail("values nested more than " + std::to_string(kMaxDepth) + " deep");
  switch (type) {
    case ThriftType::stop: fail("unexpected stop byte");
    case ThriftType::bool_true:
    case ThriftType::bool_false: return;  // a field's bool is in its header
    case ThriftType::i8: byte(); return;
    case ThriftType::i16:
    case ThriftType::i32:
    case ThriftType::i64: varint(); return;
    case ThriftType::double_:
      need(8, "a double");
      pos_ += 8;
      return;
    case ThriftType::binary: {
      const uint64_t n = varint();
      need(n, "a binary value");
      pos_ += static_cast<size_t>(n);
      return;
    }
    case ThriftType::list:
    case ThriftType::set: {
      const ListHeader h = list(Field{0, type});
      for (int64_t i = 0; i < h.size; ++i) {
        if (h.element == ThriftType::bool_true || h.element == ThriftType::bool_false) {
          byte();
        } else {
          skip(h.element, depth + 1);
        }
      }
      return;
    }
    case ThriftType::map: {
      const uint64_t n = varint();
      if (n == 0) return;
      const uint8_t types = byte();
      const int key = types >> 4, value = types & 0x0F;
      if (key == 0 || value == 0 || key > 12 || value > 12) fail("bad map key/value types");
      if (n > (size_ - pos_) / 2) fail("map of " + std::to_string(n) + " entries is longer than the bytes left");
      for (uint64_t i = 0; i < n; ++i) {
        for (int t : {key, value}) {
          if (t == 1 || t == 2) {
            byte();
          } else {
            skip(static_cast<ThriftType>(t), depth + 1);
          }
        }
      }
      return;
    }
    case ThriftType::struct_: {
      begin_struct();
      Field f;
      while (next_field(f)) skip(f.type, depth + 1);
      end_struct();
      return;
    }
  }
  fail("unknown type");
}

}  // namespace linea::data

// Element types a Tensor can hold, and the bf16 storage type with round-to-nearest-even conversion.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace linea {

enum class DType : uint8_t { f32, f64, bf16, i32, i64 };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);

// bfloat16 as stored in memory: the upper 16 bits of an IEEE float.
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) {
      bits = static_cast<uint16_t>((u >> 16) | 0x40u);  // keep NaN a NaN
    } else {
      bits = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
  }
  explicit operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// Maps a C++ element type to its DType tag.
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<bf16>() { return DType::bf16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }

}  // namespace linea

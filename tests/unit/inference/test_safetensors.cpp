// safetensors (checkpoint/safetensors.h): what write_safetensors writes reads back bit for bit
// (f32) and by value (bf16, f64); the header is 8-byte aligned JSON with the metadata; truncated
// files, mislabelled entries, unknown dtypes and overlapping data are refused naming the file and
// the tensor; a write that fails leaves no file behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "kernels/random.h"
#include "tests/testing/kernel_test.h"
#include "tests/testing/temp_dir.h"

namespace linea {
namespace {

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A file with this header (JSON text) and `data_bytes` zero bytes of data.
std::string file_with_header(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\0');
}

::testing::AssertionResult refused(const std::filesystem::path& path, const std::vector<std::string>& fragments) {
  try {
    SafetensorsFile file(path);
    return ::testing::AssertionFailure() << "opened " << path;
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    for (const std::string& f : fragments) {
      if (message.find(f) == std::string::npos) return ::testing::AssertionFailure() << message << " lacks " << f;
    }
    return ::testing::AssertionSuccess();
  }
}

TEST(Safetensors, RoundTrip) {
  testing::TempDir dir;
  Rng rng(1);
  const Tensor a = testing::to_f32(testing::random_tensor({3, 5}, rng));
  Tensor b = Tensor::empty({4}, DType::bf16);
  for (int i = 0; i < 4; ++i) b.data<bf16>()[i] = bf16(0.5f * float(i) - 1.0f);
  Tensor c = Tensor::empty({2, 1, 2}, DType::f64);
  for (int i = 0; i < 4; ++i) c.data<double>()[i] = 0.25 * i;
  write_safetensors(dir / "m.safetensors", {{"a.weight", a}, {"b", b}, {"c", c}}, {{"format", "pt"}});
  const std::string bytes = read_bytes(dir / "m.safetensors");
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  EXPECT_EQ(length % 8, 0u);
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, length));
  EXPECT_EQ(header["a.weight"]["dtype"], "F32");
  EXPECT_EQ(header["__metadata__"]["format"], "pt");

  const SafetensorsFile file(dir / "m.safetensors");
  EXPECT_EQ(file.names(), (std::vector<std::string>{"a.weight", "b", "c"}));
  EXPECT_EQ(file.shape("c"), (Shape{2, 1, 2}));
  EXPECT_EQ(file.dtype("b"), "BF16");
  EXPECT_EQ(file.metadata().at("format"), "pt");
  const Tensor a2 = file.read_f32("a.weight");
  ASSERT_EQ(a2.shape(), a.shape());
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(a2.data<float>()[i], a.data<float>()[i]);
  const Tensor b2 = file.read_f32("b"), c2 = file.read_f32("c");
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(b2.data<float>()[i], 0.5f * float(i) - 1.0f);
    EXPECT_EQ(c2.data<float>()[i], 0.25f * float(i));
  }
  EXPECT_THROW(file.read_f32("missing"), std::runtime_error);
}

TEST(Safetensors, HalfPrecisionIsConverted) {
  testing::TempDir dir;
  // F16 1.0 = 0x3c00, −2.0 = 0xc000, 2⁻²⁴ (the smallest subnormal) = 0x0001
  std::string file = file_with_header(R"({"h":{"dtype":"F16","shape":[3],"data_offsets":[0,6]}})", 0);
  file += std::string("\x00\x3c\x00\xc0\x01\x00", 6);
  write_bytes(dir / "h.safetensors", file);
  const Tensor h = SafetensorsFile(dir / "h.safetensors").read_f32("h");
  EXPECT_EQ(h.data<float>()[0], 1.0f);
  EXPECT_EQ(h.data<float>()[1], -2.0f);
  EXPECT_EQ(h.data<float>()[2], std::ldexp(1.0f, -24));
}

TEST(Safetensors, BadFilesNameTheFileAndTensor) {
  testing::TempDir dir;
  const Tensor a = Tensor::zeros({4, 4}, DType::f32);
  write_safetensors(dir / "good.safetensors", {{"w", a}});
  const std::string good = read_bytes(dir / "good.safetensors");
  write_bytes(dir / "truncated.safetensors", good.substr(0, good.size() - 10));
  EXPECT_TRUE(refused(dir / "truncated.safetensors", {"truncated.safetensors", "tensor w", "truncated"}));
  write_bytes(dir / "short.safetensors", good.substr(0, 5));
  EXPECT_TRUE(refused(dir / "short.safetensors", {"short.safetensors", "8-byte"}));
  write_bytes(dir / "header.safetensors", good.substr(0, 20));
  EXPECT_TRUE(refused(dir / "header.safetensors", {"header.safetensors", "truncated"}));
  write_bytes(dir / "mislabelled.safetensors",
              file_with_header(R"({"w":{"dtype":"F32","shape":[4,5],"data_offsets":[0,64]}})", 64));
  EXPECT_TRUE(refused(dir / "mislabelled.safetensors", {"tensor w", "F32[4, 5] needs 80 bytes", "mislabelled"}));
  write_bytes(dir / "dtype.safetensors",
              file_with_header(R"({"w":{"dtype":"F8","shape":[4],"data_offsets":[0,4]}})", 4));
  EXPECT_TRUE(refused(dir / "dtype.safetensors", {"tensor w", "unknown dtype \"F8\""}));
  write_bytes(dir / "overlap.safetensors", file_with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                                            12));
  EXPECT_TRUE(refused(dir / "overlap.safetensors", {"overlap"}));
  write_bytes(dir / "json.safetensors", file_with_header("not json", 0));
  EXPECT_TRUE(refused(dir / "json.safetensors", {"not a JSON object"}));
}

TEST(Safetensors, AFailedWriteLeavesNoFile) {
  testing::TempDir dir;
  const Tensor a = Tensor::zeros({2}, DType::f32);
  EXPECT_THROW(write_safetensors(dir / "twice.safetensors", {{"w", a}, {"w", a}}), std::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(dir / "twice.safetensors"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 0);
}

}  // namespace
}  // namespace linea

// Hdf5File: round trips of every dtype and shape, attributes, listing, conversion on read, files
// written by other HDF5 writers, and the errors bad input must produce.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "checkpoint/hdf5_file.h"
#include "kernels/random.h"
#include "tests/testing/error_of.h"
#include "tests/testing/temp_dir.h"

namespace linea {
namespace {

using testing::error_of;

namespace fs = std::filesystem;

class Hdf5FileTest : public ::testing::Test {
 protected:
  testing::TempDir temporary_;
  const fs::path& dir_ = temporary_.path();
};

// A tensor of `dtype` whose bytes follow a pattern, including NaN, ±inf and −0 for floats.
Tensor patterned(const Shape& shape, DType dtype, uint64_t seed) {
  Tensor t = Tensor::empty(shape, dtype);
  Rng rng(seed);
  auto* bytes = static_cast<unsigned char*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<unsigned char>(rng.next_u64());
  if (t.numel() >= 4 && dtype == DType::f32) {
    float* p = t.data<float>();
    p[0] = std::numeric_limits<float>::quiet_NaN();
    p[1] = -0.0f;
    p[2] = std::numeric_limits<float>::infinity();
    p[3] = std::numeric_limits<float>::denorm_min();
  }
  if (t.numel() >= 2 && dtype == DType::f64) {
    double* p = t.data<double>();
    p[0] = -std::numeric_limits<double>::infinity();
    p[1] = std::numeric_limits<double>::denorm_min();
  }
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST_F(Hdf5FileTest, RoundTripsEveryDtypeAndShapeBitExactly) {
  const std::vector<DType> dtypes = {DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64};
  const std::vector<Shape> shapes = {{}, {0}, {7}, {2, 3}, {2, 0, 3}, {1, 2, 3, 4, 5, 6}};
  const fs::path path = dir_ / "all.h5";
  std::vector<std::pair<std::string, Tensor>> written;
  {
    Hdf5File file = Hdf5File::create(path);
    uint64_t seed = 1;
    for (DType dtype : dtypes) {
      for (const Shape& shape : shapes) {
        const std::string name = std::string(dtype_name(dtype)) + "/" + shape_string(shape);
        Tensor t = patterned(shape, dtype, seed++);
        file.write(name, t);
        written.emplace_back(name, t);
      }
    }
    file.close();
  }
  Hdf5File file = Hdf5File::open(path);
  for (const auto& [name, expected] : written) {
    const Hdf5DatasetInfo info = file.dataset_info(name);
    EXPECT_EQ(info.shape, expected.shape()) << name;
    EXPECT_EQ(info.dtype, expected.dtype()) << name;
    const Tensor got = file.read(name);
    EXPECT_TRUE(same_bytes(expected, got)) << name << ": read " << got.describe();
    if (expected.dtype() != DType::i32 && expected.dtype() != DType::i64) {
      EXPECT_TRUE(same_bytes(expected, file.read(name, expected.dtype()))) << name << ": read as its own dtype";
    }
  }
}

TEST_F(Hdf5FileTest, Bf16IsStoredAsTaggedUint16) {
  const fs::path path = dir_ / "bf16.h5";
  Tensor t = Tensor::empty({3}, DType::bf16);
  t.data<bf16>()[0] = bf16(1.5f);
  t.data<bf16>()[1] = bf16(-2.0f);
  t.data<bf16>()[2] = bf16(3.140625f);
  {
    Hdf5File file = Hdf5File::create(path);
    file.write("w", t);
    EXPECT_EQ(file.string_attribute("w", "linea_dtype"), "bf16");
  }
  // Seen from plain HDF5, the dataset is 16-bit unsigned integers holding the bf16 bits.
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t dataset = H5Dopen2(file, "w", H5P_DEFAULT);
  const hid_t type = H5Dget_type(dataset);
  EXPECT_EQ(H5Tget_class(type), H5T_INTEGER);
  EXPECT_EQ(H5Tget_size(type), 2u);
  EXPECT_EQ(H5Tget_sign(type), H5T_SGN_NONE);
  uint16_t bits[3];
  H5Dread(dataset, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, bits);
  EXPECT_EQ(bits[0], t.data<bf16>()[0].bits);
  EXPECT_EQ(bits[2], t.data<bf16>()[2].bits);
  H5Tclose(type);
  H5Dclose(dataset);
  H5Fclose(file);
}

TEST_F(Hdf5FileTest, ReadConvertsBetweenFloatDtypes) {
  const fs::path path = dir_ / "convert.h5";
  Tensor f64 = Tensor::empty({5}, DType::f64);
  const double values[5] = {1.0 / 3.0, -2.5, 1e-40, 3.0e38, -0.0};
  std::memcpy(f64.raw(), values, sizeof values);
  {
    Hdf5File file = Hdf5File::create(path);
    file.write("x", f64);
    file.write("ids", Tensor::zeros({2}, DType::i64));
  }
  Hdf5File file = Hdf5File::open(path);
  const Tensor as_f32 = file.read("x", DType::f32);
  const Tensor as_bf16 = file.read("x", DType::bf16);
  ASSERT_EQ(as_f32.dtype(), DType::f32);
  ASSERT_EQ(as_f32.shape(), (Shape{5}));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(as_f32.data<float>()[i], static_cast<float>(values[i]));
    EXPECT_EQ(as_bf16.data<bf16>()[i].bits, bf16(static_cast<float>(values[i])).bits);
  }
  EXPECT_TRUE(std::signbit(as_f32.data<float>()[4]));
  const Tensor back = Hdf5File::open(path).read("x", DType::f64);
  EXPECT_TRUE(same_bytes(back, f64));

  const std::string not_float = error_of<std::runtime_error>([&] { file.read("ids", DType::f32); });
  EXPECT_NE(not_float.find("dataset 'ids'"), std::string::npos) << not_float;
  EXPECT_NE(not_float.find("stored as i64"), std::string::npos) << not_float;
  EXPECT_THROW(file.read("x", DType::i32), std::invalid_argument);
}

TEST_F(Hdf5FileTest, NamesGroupsAndExistence) {
  const fs::path path = dir_ / "names.h5";
  Hdf5File file = Hdf5File::create(path);
  file.write("model/layers.1.mixer.q_proj.weight", Tensor::zeros({2, 2}, DType::f32));
  file.write("model/layers.0.norm.weight", Tensor::zeros({2}, DType::f32));
  file.write("/optimizer/m", Tensor::zeros({4}, DType::f32));
  file.write("step", Tensor::zeros({}, DType::i64));
  EXPECT_EQ(file.dataset_names(),
            (std::vector<std::string>{"model/layers.0.norm.weight", "model/layers.1.mixer.q_proj.weight", "optimizer/m",
                                      "step"}));
  EXPECT_TRUE(file.has_dataset("model/layers.0.norm.weight"));
  EXPECT_TRUE(file.has_dataset("/model/layers.0.norm.weight"));
  EXPECT_TRUE(file.has_dataset("optimizer/m"));
  EXPECT_FALSE(file.has_dataset("model"));                // a group
  EXPECT_FALSE(file.has_dataset("missing"));              // absent
  EXPECT_FALSE(file.has_dataset("missing/deeper/name"));  // absent intermediate group
  EXPECT_FALSE(file.has_dataset("step/below"));           // below a dataset
  EXPECT_THROW(file.has_dataset(""), std::invalid_argument);
  EXPECT_THROW(file.has_dataset("/"), std::invalid_argument);
}

TEST_F(Hdf5FileTest, AttributesRoundTripOnFileAndDatasets) {
  const fs::path path = dir_ / "attributes.h5";
  {
    Hdf5File file = Hdf5File::create(path);
    file.write("w", Tensor::zeros({3, 2}, DType::f32));
    file.set_attribute("", "format", "linea-checkpoint");
    file.set_attribute("/", "empty", "");
    file.set_attribute("", "unicode", "Δ-rule ✓");
    file.set_attribute("", "version", int64_t{3});
    file.set_attribute("w", "full_shape", std::vector<int64_t>{6, 2});
    file.set_attribute("w", "offset", std::vector<int64_t>{3, 0});
    file.set_attribute("w", "scalar_shape", std::vector<int64_t>{});
    file.set_attribute("w", "big", std::numeric_limits<int64_t>::min());
    file.set_attribute("w", "version", int64_t{1});
    file.set_attribute("w", "version", int64_t{2});  // replaces
    file.set_attribute("w", "note", "first");
    file.set_attribute("w", "note", "second, longer");  // replaces with a different size
  }
  Hdf5File file = Hdf5File::open(path);
  EXPECT_EQ(file.string_attribute("", "format"), "linea-checkpoint");
  EXPECT_EQ(file.string_attribute("/", "empty"), "");
  EXPECT_EQ(file.string_attribute("", "unicode"), "Δ-rule ✓");
  EXPECT_EQ(file.int_attribute("", "version"), 3);
  EXPECT_EQ(file.int_array_attribute("w", "full_shape"), (std::vector<int64_t>{6, 2}));
  EXPECT_EQ(file.int_array_attribute("w", "offset"), (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(file.int_array_attribute("w", "scalar_shape"), (std::vector<int64_t>{}));
  EXPECT_EQ(file.int_array_attribute("w", "version"), (std::vector<int64_t>{2}));
  EXPECT_EQ(file.int_attribute("w", "big"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(file.int_attribute("w", "version"), 2);
  EXPECT_EQ(file.string_attribute("w", "note"), "second, longer");
  EXPECT_TRUE(file.has_attribute("w", "offset"));
  EXPECT_FALSE(file.has_attribute("w", "format"));
  EXPECT_TRUE(file.has_attribute("", "format"));

  const std::string missing = error_of<std::runtime_error>([&] { file.string_attribute("w", "nope"); });
  EXPECT_NE(missing.find("attribute 'nope' of 'w'"), std::string::npos) << missing;
  EXPECT_NE(missing.find("no such attribute"), std::string::npos) << missing;
  const std::string wrong_kind = error_of<std::runtime_error>([&] { file.int_attribute("", "format"); });
  EXPECT_NE(wrong_kind.find("expected integers, found a string"), std::string::npos) << wrong_kind;
  const std::string not_one = error_of<std::runtime_error>([&] { file.int_attribute("w", "full_shape"); });
  EXPECT_NE(not_one.find("expected one integer, found 2"), std::string::npos) << not_one;
  EXPECT_THROW(file.string_attribute("w", "version"), std::runtime_error);
  EXPECT_THROW(file.has_attribute("absent", "x"), std::runtime_error);
  EXPECT_THROW(file.set_attribute("w", "x", "y"), std::logic_error);  // opened read-only
}

// Files from other writers (h5py writes variable-length strings; other machines may be big-endian).
TEST_F(Hdf5FileTest, ReadsFilesFromOtherWriters) {
  const fs::path path = dir_ / "foreign.h5";
  {
    const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[2] = {2, 2};
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    const hid_t dataset = H5Dcreate2(file, "q", H5T_IEEE_F32BE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const float values[4] = {1.f, -2.f, 0.25f, 8.f};
    H5Dwrite(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
    const hid_t string_type = H5Tcopy(H5T_C_S1);
    H5Tset_size(string_type, H5T_VARIABLE);
    const hid_t scalar = H5Screate(H5S_SCALAR);
    const hid_t attribute = H5Acreate2(dataset, "layout", string_type, scalar, H5P_DEFAULT, H5P_DEFAULT);
    const char* text = "B,T,H,K";
    H5Awrite(attribute, string_type, &text);
    const hid_t int32_attribute = H5Acreate2(file, "heads", H5T_STD_I32BE, scalar, H5P_DEFAULT, H5P_DEFAULT);
    const int32_t heads = 4;
    H5Awrite(int32_attribute, H5T_NATIVE_INT32, &heads);
    const hid_t u16 = H5Dcreate2(file, "raw_u16", H5T_STD_U16LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims7[7] = {1, 1, 1, 1, 1, 1, 2};
    const hid_t space7 = H5Screate_simple(7, dims7, nullptr);
    const hid_t seven = H5Dcreate2(file, "seven_dims", H5T_IEEE_F32LE, space7, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    for (hid_t id : {seven, u16}) H5Dclose(id);
    H5Sclose(space7);
    H5Aclose(int32_attribute);
    H5Aclose(attribute);
    H5Sclose(scalar);
    H5Tclose(string_type);
    H5Dclose(dataset);
    H5Sclose(space);
    H5Fclose(file);
  }
  Hdf5File file = Hdf5File::open(path);
  const Tensor q = file.read("q");
  ASSERT_EQ(q.dtype(), DType::f32);
  ASSERT_EQ(q.shape(), (Shape{2, 2}));
  EXPECT_EQ(q.data<float>()[1], -2.f);
  EXPECT_EQ(q.data<float>()[3], 8.f);
  EXPECT_EQ(file.string_attribute("q", "layout"), "B,T,H,K");
  EXPECT_EQ(file.int_attribute("", "heads"), 4);
  const std::string untagged = error_of<std::runtime_error>([&] { file.read("raw_u16"); });
  EXPECT_NE(untagged.find("dataset 'raw_u16'"), std::string::npos) << untagged;
  EXPECT_NE(untagged.find("stored as 16-bit unsigned integer"), std::string::npos) << untagged;
  const std::string too_many = error_of<std::runtime_error>([&] { file.dataset_info("seven_dims"); });
  EXPECT_NE(too_many.find("has 7 dimensions"), std::string::npos) << too_many;
}

TEST_F(Hdf5FileTest, BadInputGivesClearErrors) {
  const fs::path missing = dir_ / "missing.h5";
  std::string message = error_of<std::runtime_error>([&] { Hdf5File::open(missing); });
  EXPECT_NE(message.find(missing.string()), std::string::npos) << message;
  EXPECT_NE(message.find("no such file"), std::string::npos) << message;

  const fs::path text = dir_ / "text.h5";
  std::ofstream(text) << "not hdf5 at all";
  message = error_of<std::runtime_error>([&] { Hdf5File::open(text); });
  EXPECT_NE(message.find("not an HDF5 file"), std::string::npos) << message;

  message = error_of<std::runtime_error>([&] { Hdf5File::open(dir_); });
  EXPECT_NE(message.find("directory"), std::string::npos) << message;

  const fs::path no_dir = dir_ / "no" / "such" / "dir" / "x.h5";
  message = error_of<std::runtime_error>([&] { Hdf5File::create(no_dir); });
  EXPECT_NE(message.find(no_dir.string()), std::string::npos) << message;
  EXPECT_NE(message.find("creating failed"), std::string::npos) << message;

  const fs::path path = dir_ / "data.h5";
  {
    Hdf5File file = Hdf5File::create(path);
    file.write("w", Tensor::zeros({2}, DType::f32));
    message = error_of<std::runtime_error>([&] { file.write("w", Tensor::zeros({2}, DType::f32)); });
    EXPECT_NE(message.find("dataset 'w'"), std::string::npos) << message;
    EXPECT_NE(message.find("already exists"), std::string::npos) << message;
    message = error_of<std::runtime_error>([&] { file.write("w/below", Tensor::zeros({1}, DType::f32)); });
    EXPECT_NE(message.find("'w' exists and is not a group"), std::string::npos) << message;
    EXPECT_THROW(file.write("", Tensor::zeros({1}, DType::f32)), std::invalid_argument);
    EXPECT_THROW(file.write("undefined", Tensor()), std::invalid_argument);
  }
  message = error_of<std::runtime_error>([&] { Hdf5File::create(path); });
  EXPECT_NE(message.find("already exists"), std::string::npos) << message;
  EXPECT_EQ(Hdf5File::open(path).read("w").numel(), 2);  // the failed create left it intact

  Hdf5File file = Hdf5File::open(path);
  message = error_of<std::runtime_error>([&] { file.read("absent"); });
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  EXPECT_NE(message.find("dataset 'absent'"), std::string::npos) << message;
  EXPECT_NE(message.find("no such dataset"), std::string::npos) << message;
  EXPECT_THROW(file.write("v", Tensor::zeros({1}, DType::f32)), std::logic_error);
  file.close();
  EXPECT_THROW(file.read("w"), std::logic_error);

  Hdf5File truncated = Hdf5File::create(path, Hdf5File::Create::truncate);
  EXPECT_TRUE(truncated.dataset_names().empty());
}

// HDF5 would print its error stack to stderr on every failure; the wrapper turns that off on
// every thread that uses it.
TEST_F(Hdf5FileTest, FailuresPrintNothing) {
  const fs::path path = dir_ / "quiet.h5";
  Hdf5File::create(path).write("w", Tensor::zeros({1}, DType::f32));
  auto fail_quietly = [&] {
    ::testing::internal::CaptureStderr();
    EXPECT_THROW(Hdf5File::create(dir_ / "absent_dir" / "x.h5"), std::runtime_error);
    EXPECT_THROW(Hdf5File::open(path).read("w/x"), std::runtime_error);
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  };
  fail_quietly();
  std::thread(fail_quietly).join();
}

TEST_F(Hdf5FileTest, MovedFileKeepsItsHandle) {
  const fs::path path = dir_ / "moved.h5";
  Hdf5File a = Hdf5File::create(path);
  Hdf5File b = std::move(a);
  EXPECT_FALSE(a.is_open());
  b.write("w", Tensor::zeros({2}, DType::i32));
  Hdf5File c = Hdf5File::create(dir_ / "other.h5");
  c = std::move(b);
  EXPECT_EQ(c.path(), path);
  c.close();
  EXPECT_EQ(Hdf5File::open(path).read("w").dtype(), DType::i32);
}

}  // namespace
}  // namespace linea

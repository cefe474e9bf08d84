// What the GPU tests share: a fixture that skips every test when no CUDA device is present, and
// the moves between a CPU reference and a device run of one op.
//
// A case starts from f64 host tensors holding values that the device's dtype represents exactly
// (representable()); the CPU reference runs on them in f64, the device op on copies in f32 or bf16
// (to_device()), and the device results come back as f64 (to_host()) for fla's relative-RMS
// comparison at the dtype's tolerance.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kernels/device_memory.h"
#include "kernels/random.h"
#include "kernels/tensor.h"
#include "tests/testing/assert_close.h"

namespace linea::testing {

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// A GPU test run once with f32 and once with bf16 activations.
class GpuDtypeTest : public GpuTest, public ::testing::WithParamInterface<DType> {};

inline std::string dtype_test_name(const ::testing::TestParamInfo<DType>& info) {
  return std::string(dtype_name(info.param));
}

// A suite's parameter: entry `index` of its table of cases, in `dtype`. in_both_dtypes lists every
// entry of a table of `cases` in f32 and in bf16; case_dtype_name names one "<case>_<dtype>".
struct CaseInDtype {
  size_t index;
  DType dtype;
};
inline std::vector<CaseInDtype> in_both_dtypes(size_t cases) {
  std::vector<CaseInDtype> params;
  for (size_t c = 0; c < cases; ++c) {
    for (DType dtype : {DType::f32, DType::bf16}) params.push_back({c, dtype});
  }
  return params;
}
inline std::string case_dtype_name(const std::string& case_name, DType dtype) {
  return case_name + "_" + std::string(dtype_name(dtype));
}

// fla's err_ratio limits: f32 results against an f64 reference, bf16 results (one rounding of the
// output, f32 arithmetic inside).
inline double tolerance(DType dtype) { return dtype == DType::bf16 ? 5e-3 : 1e-5; }

// f64 host tensor whose entries are exactly representable in `dtype` (f32 or bf16).
inline Tensor representable(const Tensor& f64, DType dtype) {
  Tensor out = Tensor::empty(f64.shape(), DType::f64);
  const double* src = f64.data<double>();
  double* dst = out.data<double>();
  for (int64_t i = 0; i < f64.numel(); ++i) {
    const float f = static_cast<float>(src[i]);
    dst[i] = dtype == DType::bf16 ? static_cast<float>(bf16(f)) : f;
  }
  return out;
}

// Uniform entries in [lo, hi), representable in `dtype`.
inline Tensor random_values(const Shape& shape, DType dtype, Rng& rng, double lo = -1.0, double hi = 1.0) {
  Tensor t = Tensor::empty(shape, DType::f64);
  fill_uniform(t, rng, lo, hi);
  return representable(t, dtype);
}

// A device tensor of `dtype` holding the f64 host tensor's values (i32 tensors are copied as is).
inline Tensor to_device(const Tensor& host, DType dtype) {
  Tensor staged = Tensor::empty(host.shape(), dtype);
  const int64_t n = host.numel();
  if (dtype == DType::i32) {
    staged.copy_from(host);
  } else if (dtype == DType::f32) {
    for (int64_t i = 0; i < n; ++i) staged.data<float>()[i] = static_cast<float>(host.data<double>()[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) staged.data<bf16>()[i] = bf16(static_cast<float>(host.data<double>()[i]));
  }
  Tensor device = Tensor::empty(host.shape(), dtype, Device::cuda);
  device.copy_from(staged);
  return device;
}

// to_device for a defined tensor; undefined stays undefined.
inline Tensor device_copy(const Tensor& host, DType dtype) {
  return host.defined() ? to_device(host, dtype) : Tensor();
}

// An uninitialised device tensor shaped like `like` in `dtype`; undefined for undefined.
inline Tensor device_empty(const Tensor& like, DType dtype) {
  return like.defined() ? Tensor::empty(like.shape(), dtype, Device::cuda) : Tensor();
}

// A device f32 state to advance in place: a copy of the device tensor h0, or zeros of `shape` when
// h0 is undefined.
inline Tensor device_state(const Tensor& h0, const Shape& shape) {
  if (!h0.defined()) return Tensor::zeros(shape, DType::f32, Device::cuda);
  Tensor state = Tensor::empty(h0.shape(), DType::f32, Device::cuda);
  state.copy_from(h0);
  return state;
}

// Whether two tensors (on any device) hold the same bytes.
inline ::testing::AssertionResult same_bits(const std::string& what, const Tensor& a, const Tensor& b) {
  const Tensor x = a.clone(), y = b.clone();
  if (x.nbytes() == y.nbytes() && std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << what << ": the bytes differ";
}

// A family's recurrent forward on the device against the CPU op's result `ref` (its o and ht):
// forward(problem, o, ht) runs it on `p` (operands on the device, compute dtype `dtype`); o within
// the dtype's tolerance and ht within f32's, their err_ratios kept in `worst` (per tensor); then the
// same call advancing a copy of h0 in place (h0 = ht) must give the same bits.
template <class Problem, class Result, class Forward>
void expect_recurrent_forward(Problem p, const Result& ref, DType dtype, Forward forward,
                              std::map<std::string, double>& worst) {
  Tensor o = device_empty(p.d_o, dtype), ht = device_empty(p.dht, DType::f32);
  forward(p, o, ht);
  const Tensor got_o = to_f64(o), got_ht = to_f64(ht);
  EXPECT_TRUE(assert_close("o", ref.o, got_o, tolerance(dtype), 0));
  EXPECT_TRUE(assert_close("ht", ref.ht, got_ht, tolerance(DType::f32), 0));
  worst["o"] = std::max(worst["o"], compare(ref.o, got_o).err_ratio);
  worst["ht"] = std::max(worst["ht"], compare(ref.ht, got_ht).err_ratio);

  Tensor h = device_state(p.in.h0, p.dht.shape());
  p.in.h0 = h;
  Tensor o_in_place = device_empty(p.d_o, dtype);
  forward(p, o_in_place, h);
  EXPECT_TRUE(same_bits("in-place ht", ht, h));
  EXPECT_TRUE(same_bits("in-place o", o, o_in_place));
}

// A number as part of a test name: 0.1 → "0p1".
inline std::string name_number(double x) {
  std::string s = std::to_string(x);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  for (char& c : s) c = c == '.' ? 'p' : c;
  return s;
}

// A device (or host) floating tensor as f64 on the host.
inline Tensor to_host(const Tensor& t) { return to_f64(t); }

// The dtype of statistics (rstd) in a device call with `dtype` activations.
inline constexpr DType kStatistics = DType::f32;

}  // namespace linea::testing

#include "tests/testing/assert_close.h"

#include <cmath>
#include <cstring>
#include <sstream>

namespace linea::testing {

namespace {
template <class Out>
Tensor convert(const Tensor& t) {
  Tensor c = t.clone();
  Tensor out = Tensor::empty(t.shape(), dtype_of<Out>());
  Out* o = out.data<Out>();
  const int64_t n = t.numel();
  switch (c.dtype()) {
    case DType::f32:
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(c.data<float>()[i]);
      break;
    case DType::f64:
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(c.data<double>()[i]);
      break;
    case DType::bf16:
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(static_cast<float>(c.data<bf16>()[i]));
      break;
    default: throw std::invalid_argument("convert: not a floating tensor: " + t.describe());
  }
  return out;
}
}  // namespace

Tensor to_f64(const Tensor& t) { return convert<double>(t); }
Tensor to_f32(const Tensor& t) { return convert<float>(t); }

CloseReport compare(const Tensor& ref, const Tensor& got) {
  if (ref.numel() != got.numel()) {
    throw std::invalid_argument("compare: " + ref.describe() + " vs " + got.describe());
  }
  Tensor r = to_f64(ref), g = to_f64(got);
  const double* a = r.data<double>();
  const double* b = g.data<double>();
  double sum_d2 = 0, sum_r2 = 0;
  CloseReport rep;
  for (int64_t i = 0; i < r.numel(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) rep.has_nan = true;
    const double d = a[i] - b[i];
    rep.abs_err = std::max(rep.abs_err, std::abs(d));
    sum_d2 += d * d;
    sum_r2 += a[i] * a[i];
  }
  const double n = std::max<double>(1, static_cast<double>(r.numel()));
  rep.err_ratio = std::sqrt(sum_d2 / n) / (std::sqrt(sum_r2 / n) + 1e-8);
  return rep;
}

::testing::AssertionResult assert_close(const std::string& what, const Tensor& ref, const Tensor& got, double ratio,
                                        double atol) {
  const CloseReport rep = compare(ref, got);
  std::ostringstream os;
  os << what << ": abs_err " << rep.abs_err << ", err_ratio " << rep.err_ratio << " (limit " << ratio << ")";
  if (!rep.has_nan && rep.abs_err <= atol) return ::testing::AssertionSuccess() << os.str();
  if (rep.has_nan) return ::testing::AssertionFailure() << os.str() << ": NaN present";
  if (rep.err_ratio < ratio) return ::testing::AssertionSuccess() << os.str();
  return ::testing::AssertionFailure() << os.str();
}

void expect_same_bits(const NamedTensors& expected, const NamedTensors& got, const std::string& what) {
  ASSERT_EQ(expected.size(), got.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    const Tensor& a = expected[i].second;
    const Tensor& b = got[i].second;
    ASSERT_EQ(a.nbytes(), b.nbytes()) << what << " " << expected[i].first;
    EXPECT_EQ(0, std::memcmp(a.raw(), b.raw(), a.nbytes()))
        << what << " " << expected[i].first << ": err_ratio " << compare(a, b).err_ratio;
  }
}

}  // namespace linea::testing

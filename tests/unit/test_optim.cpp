// Optimizers (AdamW, Muon), Newton–Schulz, the learning-rate schedule and gradient clipping,
// against updates computed independently here in double (plain scalar loops, no BLAS).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "kernels/newton_schulz.h"
#include "kernels/random.h"
#include "worker/adamw.h"
#include "worker/grad_clip.h"
#include "worker/lr_schedule.h"
#include "worker/muon.h"
#include "worker/optimizer.h"

namespace linea {
namespace {

using Matrix = std::vector<std::vector<double>>;  // row-major, for the double references

constexpr double kBeta1 = 0.9, kBeta2 = 0.95, kEps = 1e-8, kWeightDecay = 0.1, kMu = 0.95;
constexpr double kNsA = 3.4445, kNsB = -4.7750, kNsC = 2.0315;

OptimizerConfig test_config(OptimizerKind kind) {
  OptimizerConfig c;
  c.kind = kind;
  c.beta1 = kBeta1;
  c.beta2 = kBeta2;
  c.eps = kEps;
  c.weight_decay = kWeightDecay;
  c.muon_momentum = kMu;
  return c;
}

void set_values(const Tensor& t, const std::vector<double>& v) {
  ASSERT_EQ(static_cast<int64_t>(v.size()), t.numel());
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.dtype() == DType::f32) {
      t.data<float>()[i] = static_cast<float>(v[i]);
    } else {
      t.data<double>()[i] = v[i];
    }
  }
}

double value_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::f32 ? t.data<float>()[i] : t.data<double>()[i];
}

std::vector<double> values_of(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = value_at(t, i);
  return v;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// ---- double references -------------------------------------------------------------------------

// Textbook AdamW on one scalar: m̂ = m/(1−β1^t), v̂ = v/(1−β2^t), θ ← θ(1−lr·λ) − lr·m̂/(sqrt(v̂)+eps).
struct AdamWScalar {
  double theta, m = 0, v = 0;
  int t = 0;
  void step(double g, double lr, bool decay) {
    ++t;
    if (decay) theta *= 1 - lr * kWeightDecay;
    m = kBeta1 * m + (1 - kBeta1) * g;
    v = kBeta2 * v + (1 - kBeta2) * g * g;
    const double m_hat = m / (1 - std::pow(kBeta1, t)), v_hat = v / (1 - std::pow(kBeta2, t));
    theta -= lr * m_hat / (std::sqrt(v_hat) + kEps);
  }
};

Matrix to_matrix(const std::vector<double>& flat, size_t rows, size_t cols) {
  Matrix m(rows, std::vector<double>(cols));
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) m[r][c] = flat[r * cols + c];
  return m;
}

Matrix matmul(const Matrix& a, const Matrix& b) {
  Matrix c(a.size(), std::vector<double>(b[0].size(), 0.0));
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t k = 0; k < b.size(); ++k)
      for (size_t j = 0; j < b[0].size(); ++j) c[i][j] += a[i][k] * b[k][j];
  return c;
}

Matrix transpose(const Matrix& a) {
  Matrix t(a[0].size(), std::vector<double>(a.size()));
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[0].size(); ++j) t[j][i] = a[i][j];
  return t;
}

// Newton–Schulz without the transposition trick: for a tall X it uses the equivalent right-hand
// form X ← a·X + X·(b·A + c·A²) with A = XᵀX, so it shares no code path with the library.
Matrix newton_schulz_reference(const Matrix& g, int steps) {
  double sum_sq = 0;
  for (const auto& row : g)
    for (double v : row) sum_sq += v * v;
  const double scale = 1.0 / (std::sqrt(sum_sq) + 1e-7);
  Matrix x = g;
  for (auto& row : x)
    for (double& v : row) v *= scale;
  const bool tall = g.size() > g[0].size();
  for (int s = 0; s < steps; ++s) {
    const Matrix a = tall ? matmul(transpose(x), x) : matmul(x, transpose(x));
    const Matrix a2 = matmul(a, a);
    Matrix b = a;
    for (size_t i = 0; i < b.size(); ++i)
      for (size_t j = 0; j < b.size(); ++j) b[i][j] = kNsB * a[i][j] + kNsC * a2[i][j];
    const Matrix bx = tall ? matmul(x, b) : matmul(b, x);
    for (size_t i = 0; i < x.size(); ++i)
      for (size_t j = 0; j < x[0].size(); ++j) x[i][j] = kNsA * x[i][j] + bx[i][j];
  }
  return x;
}

// The map Newton–Schulz applies to each normalised singular value, `steps` times.
double ns_polynomial(double x, int steps) {
  for (int s = 0; s < steps; ++s) x = kNsA * x + kNsB * x * x * x + kNsC * x * x * x * x * x;
  return x;
}

// Eigenvalues of a symmetric matrix by cyclic Jacobi rotations.
std::vector<double> symmetric_eigenvalues(Matrix a) {
  const size_t n = a.size();
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (size_t p = 0; p < n; ++p)
      for (size_t q = p + 1; q < n; ++q) off += a[p][q] * a[p][q];
    if (off < 1e-26) break;
    for (size_t p = 0; p < n; ++p) {
      for (size_t q = p + 1; q < n; ++q) {
        if (std::abs(a[p][q]) < 1e-300) continue;
        const double theta = (a[q][q] - a[p][p]) / (2 * a[p][q]);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (size_t k = 0; k < n; ++k) {  // A ← A·J
          const double akp = a[k][p], akq = a[k][q];
          a[k][p] = c * akp - s * akq;
          a[k][q] = s * akp + c * akq;
        }
        for (size_t k = 0; k < n; ++k) {  // A ← Jᵀ·A
          const double apk = a[p][k], aqk = a[q][k];
          a[p][k] = c * apk - s * aqk;
          a[q][k] = s * apk + c * aqk;
        }
      }
    }
  }
  std::vector<double> eig(n);
  for (size_t i = 0; i < n; ++i) eig[i] = a[i][i];
  return eig;
}

std::vector<double> singular_values(const Matrix& x) {
  const bool tall = x.size() > x[0].size();
  std::vector<double> sv = symmetric_eigenvalues(tall ? matmul(transpose(x), x) : matmul(x, transpose(x)));
  for (double& s : sv) s = std::sqrt(std::max(s, 0.0));
  return sv;
}

Matrix rotation2(double angle) { return {{std::cos(angle), -std::sin(angle)}, {std::sin(angle), std::cos(angle)}}; }

// Rotation by `angle` about the unit axis (1, 2, 2)/3 (Rodrigues' formula).
Matrix rotation3(double angle) {
  const double u[3] = {1.0 / 3, 2.0 / 3, 2.0 / 3};
  const double c = std::cos(angle), s = std::sin(angle);
  const double cross[3][3] = {{0, -u[2], u[1]}, {u[2], 0, -u[0]}, {-u[1], u[0], 0}};
  Matrix r(3, std::vector<double>(3));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) r[i][j] = (i == j ? c : 0.0) + s * cross[i][j] + (1 - c) * u[i] * u[j];
  return r;
}

std::vector<double> flatten(const Matrix& m) {
  std::vector<double> flat;
  for (const auto& row : m) flat.insert(flat.end(), row.begin(), row.end());
  return flat;
}

Tensor tensor_from(const std::vector<double>& flat, Shape shape, DType dtype) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  set_values(t, flat);
  return t;
}

template <class T>
constexpr double tolerance() {
  return std::is_same_v<T, double> ? 1e-12 : 2e-6;
}

template <class T>
class OptimizerTyped : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(OptimizerTyped, FloatTypes);

// ---- AdamW -------------------------------------------------------------------------------------

TYPED_TEST(OptimizerTyped, AdamWMatchesHandComputedUpdates) {
  constexpr DType dtype = dtype_of<TypeParam>();
  ParameterSet ps(dtype);
  Parameter* w = ps.declare("w", {2, 2}, ParamRole::matrix, true);
  Parameter* gain = ps.declare("gain", {3}, ParamRole::vector, false);
  ps.finalize();
  const std::vector<double> w0 = {0.5, -1.0, 0.25, 2.0}, gain0 = {1.0, 0.5, -0.5};
  const std::vector<std::vector<double>> w_grads = {{0.2, -0.1, 0.0, 3.0}, {-0.1, -0.3, 0.4, 1.0}};
  const std::vector<std::vector<double>> gain_grads = {{0.01, -2.0, 0.5}, {0.02, 1.0, -0.5}};
  const double lrs[2] = {0.01, 0.005};
  set_values(w->value, w0);
  set_values(gain->value, gain0);

  std::vector<AdamWScalar> w_ref, gain_ref;
  for (double v : w0) w_ref.push_back({v});
  for (double v : gain0) gain_ref.push_back({v});

  auto opt = make_optimizer(test_config(OptimizerKind::adamw));
  for (int s = 0; s < 2; ++s) {
    set_values(w->grad, w_grads[s]);
    set_values(gain->grad, gain_grads[s]);
    opt->step(ps, lrs[s]);
    for (size_t i = 0; i < 4; ++i) w_ref[i].step(w_grads[s][i], lrs[s], true);
    for (size_t i = 0; i < 3; ++i) gain_ref[i].step(gain_grads[s][i], lrs[s], false);
    for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(value_at(w->value, i), w_ref[i].theta, tolerance<TypeParam>());
    for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(value_at(gain->value, i), gain_ref[i].theta, tolerance<TypeParam>());
    if (s == 0) {  // after one step m̂ = g and v̂ = g²: θ(1 − lr·λ) − lr·g/(|g| + eps)
      EXPECT_NEAR(value_at(w->value, 0), 0.5 * (1 - 0.01 * 0.1) - 0.01 * 0.2 / (0.2 + 1e-8), tolerance<TypeParam>());
      EXPECT_NEAR(value_at(w->value, 2), 0.25 * (1 - 0.01 * 0.1), tolerance<TypeParam>());  // g = 0
      EXPECT_NEAR(value_at(gain->value, 1), 0.5 + 0.01 * 2.0 / (2.0 + 1e-8), tolerance<TypeParam>());
    }
  }
  // Written out from an independent evaluation of the same two steps.
  const std::vector<double> w_expected = {0.48791340334485717, -0.9839620405019847, 0.24595032511677134,
                                          1.9826061918272906};
  const std::vector<double> gain_expected = {0.9852100836591665, 0.5113418471818665, -0.5097368419105263};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(value_at(w->value, i), w_expected[i], tolerance<TypeParam>());
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(value_at(gain->value, i), gain_expected[i], tolerance<TypeParam>());
  EXPECT_EQ(opt->step_count(), 2);
}

// With zero gradients the Adam term is 0, so a step multiplies each parameter by 1 − lr·λ exactly
// where weight decay applies and leaves it unchanged elsewhere.
void expect_decay_pattern(OptimizerKind kind, bool decay_embeddings) {
  SCOPED_TRACE(std::string(optimizer_kind_name(kind)) + (decay_embeddings ? " decay_embeddings" : ""));
  ParameterSet ps;
  struct Case {
    const char* name;
    ParamRole role;
    bool weight_decay;
    bool expect_decay;
  };
  const Case cases[] = {
      {"matrix", ParamRole::matrix, true, true},
      {"matrix_no_wd", ParamRole::matrix, false, false},
      {"embedding", ParamRole::embedding, true, decay_embeddings},
      {"head", ParamRole::head, true, true},
      {"norm", ParamRole::vector, false, false},
      {"gate", ParamRole::gate, false, false},
      {"conv", ParamRole::conv, true, true},
  };
  for (const Case& c : cases) ps.declare(c.name, {2, 3}, c.role, c.weight_decay);
  ps.finalize();
  fill_constant(ps.values(), 1.0);
  OptimizerConfig config = test_config(kind);
  config.decay_embeddings = decay_embeddings;
  auto opt = make_optimizer(config);
  opt->step(ps, 0.5);
  const float decayed = 1.0f * static_cast<float>(1 - 0.5 * kWeightDecay);
  for (const Case& c : cases) {
    const Parameter* p = ps.find(c.name);
    for (int64_t i = 0; i < p->value.numel(); ++i) {
      EXPECT_EQ(p->value.data<float>()[i], c.expect_decay ? decayed : 1.0f) << c.name;
    }
  }
}

TEST(WeightDecay, SkippedForNormsGatesAndOptionallyEmbeddings) {
  for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::muon}) {
    expect_decay_pattern(kind, false);
    expect_decay_pattern(kind, true);
  }
}

// ---- Newton–Schulz -------------------------------------------------------------------------------

// G = U·Σ·Vᵀ with known rotations U, V and singular values (3, 4): the result must be
// U·diag(p⁵(3/5), p⁵(4/5))·Vᵀ, p the quintic; checked for the wide matrix and its transpose.
TYPED_TEST(OptimizerTyped, NewtonSchulzActsOnSingularValuesOnly) {
  constexpr DType dtype = dtype_of<TypeParam>();
  const double norm = 5 + 1e-7;
  const double s1 = ns_polynomial(3 / norm, 5), s2 = ns_polynomial(4 / norm, 5);
  EXPECT_NEAR(s1, 0.7228761296269464, 1e-13);  // written out from an independent evaluation
  EXPECT_NEAR(s2, 1.1192039041778885, 1e-13);
  const Matrix u = rotation2(0.3), v = rotation3(1.1);
  const Matrix sigma = {{3, 0, 0}, {0, 4, 0}}, sigma_out = {{s1, 0, 0}, {0, s2, 0}};
  const Matrix g = matmul(matmul(u, sigma), transpose(v));
  const Matrix expected = matmul(matmul(u, sigma_out), transpose(v));

  for (bool tall : {false, true}) {
    SCOPED_TRACE(tall ? "3x2" : "2x3");
    const Matrix gi = tall ? transpose(g) : g, ei = tall ? transpose(expected) : expected;
    const Shape shape = {static_cast<int64_t>(gi.size()), static_cast<int64_t>(gi[0].size())};
    Tensor gt = tensor_from(flatten(gi), shape, dtype);
    Tensor out = Tensor::empty(shape, dtype);
    ops::newton_schulz(gt, out, 5, Tensor::empty({ops::newton_schulz_workspace_numel(shape[0], shape[1])}, dtype));
    const std::vector<double> got = values_of(out), want = flatten(ei);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 50 * tolerance<TypeParam>());
  }
  // In place (out = g), diagonal input: the polynomial values appear on the diagonal.
  Tensor diag = tensor_from({3, 0, 0, 0, 4, 0}, {2, 3}, dtype);
  ops::newton_schulz(diag, diag, 5, Tensor::empty({ops::newton_schulz_workspace_numel(2, 3)}, dtype));
  EXPECT_NEAR(value_at(diag, 0), s1, 50 * tolerance<TypeParam>());
  EXPECT_NEAR(value_at(diag, 4), s2, 50 * tolerance<TypeParam>());
  EXPECT_EQ(value_at(diag, 1), 0.0);
}

// Random Gaussian gradients, f32: all singular values of the output lie in the quintic's band, the
// singular vectors are kept (O·Gᵀ = U·S'·S·Uᵀ is symmetric), and f32 agrees with the f64 reference.
TEST(NewtonSchulz, SingularValuesInBandForWideAndTallMatrices) {
  Rng rng(11);
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{24, 64}, {64, 24}, {32, 48}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    Tensor g = Tensor::empty({rows, cols}, DType::f32);
    fill_normal(g, rng, 0.0, 0.02);
    Tensor out = Tensor::empty({rows, cols}, DType::f32);
    ops::newton_schulz(g, out, 5, Tensor::empty({ops::newton_schulz_workspace_numel(rows, cols)}, DType::f32));

    const Matrix gm = to_matrix(values_of(g), rows, cols), om = to_matrix(values_of(out), rows, cols);
    for (double s : singular_values(om)) {
      EXPECT_GE(s, 0.6);
      EXPECT_LE(s, 1.25);
    }
    const Matrix ogt = matmul(om, transpose(gm));
    double asym = 0, total = 0;
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < rows; ++j) {
        asym = std::max(asym, std::abs(ogt[i][j] - ogt[j][i]));
        total = std::max(total, std::abs(ogt[i][j]));
      }
    }
    EXPECT_LT(asym, 1e-4 * total);

    const std::vector<double> ref = flatten(newton_schulz_reference(gm, 5)), got = values_of(out);
    double err = 0, ref_sq = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      err += (ref[i] - got[i]) * (ref[i] - got[i]);
      ref_sq += ref[i] * ref[i];
    }
    EXPECT_LT(std::sqrt(err / ref_sq), 1e-5);
  }
}

TEST(NewtonSchulz, RejectsBadArguments) {
  Tensor g = Tensor::zeros({4, 3}, DType::f32);
  Tensor ws = Tensor::empty({ops::newton_schulz_workspace_numel(4, 3)}, DType::f32);
  EXPECT_THROW(ops::newton_schulz(g, Tensor::empty({3, 4}, DType::f32), 5, ws), std::invalid_argument);
  EXPECT_THROW(ops::newton_schulz(g, g, 5, Tensor::empty({10}, DType::f32)), std::invalid_argument);
  EXPECT_THROW(ops::newton_schulz(g, g, 5, Tensor::empty({100}, DType::f64)), std::invalid_argument);
  EXPECT_THROW(ops::newton_schulz(Tensor::zeros({12}, DType::f32), g, 5, ws), std::invalid_argument);
}

// ---- Muon --------------------------------------------------------------------------------------

TYPED_TEST(OptimizerTyped, MuonMatchesHandComputedUpdates) {
  constexpr DType dtype = dtype_of<TypeParam>();
  ParameterSet ps(dtype);
  Parameter* wide = ps.declare("wide", {2, 3}, ParamRole::matrix, true);
  Parameter* tall = ps.declare("tall", {3, 2}, ParamRole::matrix, false);
  Parameter* gain = ps.declare("gain", {2}, ParamRole::vector, false);
  ps.finalize();
  const std::vector<double> wide0 = {0.1, -0.2, 0.3, 0.4, 0.0, -0.5}, tall0 = {1.0, 0.5, -0.5, 0.25, 0.0, 2.0};
  const std::vector<double> gain0 = {1.0, -1.0};
  const std::vector<std::vector<double>> wide_g = {{0.3, -0.1, 0.2, 0.05, 0.4, -0.3}, {-0.2, 0.1, 0.1, 0.3, -0.1, 0.2}};
  const std::vector<std::vector<double>> tall_g = {{1.0, 2.0, -1.0, 0.5, 0.0, 1.5}, {0.5, -0.5, 1.0, 1.0, 2.0, -1.0}};
  const std::vector<std::vector<double>> gain_g = {{0.1, -0.2}, {0.3, 0.1}};
  const double lrs[2] = {0.02, 0.01};
  set_values(wide->value, wide0);
  set_values(tall->value, tall0);
  set_values(gain->value, gain0);

  struct MatrixRef {  // Muon on one matrix, in double
    std::vector<double> theta, momentum;
    size_t rows, cols;
    bool decay;
    void step(const std::vector<double>& g, double lr) {
      std::vector<double> u(g.size());
      for (size_t i = 0; i < g.size(); ++i) {
        momentum[i] = kMu * momentum[i] + g[i];
        u[i] = g[i] + kMu * momentum[i];
      }
      const std::vector<double> o = flatten(newton_schulz_reference(to_matrix(u, rows, cols), 5));
      const double scale = 0.2 * std::sqrt(static_cast<double>(std::max(rows, cols)));
      for (size_t i = 0; i < g.size(); ++i) {
        if (decay) theta[i] *= 1 - lr * kWeightDecay;
        theta[i] -= lr * scale * o[i];
      }
    }
  };
  MatrixRef wide_ref{wide0, std::vector<double>(6, 0.0), 2, 3, true};
  MatrixRef tall_ref{tall0, std::vector<double>(6, 0.0), 3, 2, false};
  std::vector<AdamWScalar> gain_ref = {{gain0[0]}, {gain0[1]}};

  auto opt = make_optimizer(test_config(OptimizerKind::muon));
  EXPECT_EQ(opt->kind(), OptimizerKind::muon);
  for (int s = 0; s < 2; ++s) {
    set_values(wide->grad, wide_g[s]);
    set_values(tall->grad, tall_g[s]);
    set_values(gain->grad, gain_g[s]);
    opt->step(ps, lrs[s]);
    wide_ref.step(wide_g[s], lrs[s]);
    tall_ref.step(tall_g[s], lrs[s]);
    for (size_t i = 0; i < 2; ++i) gain_ref[i].step(gain_g[s][i], lrs[s], false);
    const double tol = 20 * tolerance<TypeParam>();
    for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(value_at(wide->value, i), wide_ref.theta[i], tol) << "step " << s;
    for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(value_at(tall->value, i), tall_ref.theta[i], tol) << "step " << s;
    for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(value_at(gain->value, i), gain_ref[i].theta, tol) << "step " << s;
  }

  const OptimizerState state = opt->export_state();
  EXPECT_EQ(state.kind, "muon");
  EXPECT_EQ(state.step, 2);
  std::vector<std::string> names;
  for (const auto& [name, t] : state.tensors) names.push_back(name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"adamw.m/gain", "adamw.v/gain", "muon.momentum/tall", "muon.momentum/wide"}));
  const std::vector<double> momentum = values_of(state.tensors.at("muon.momentum/wide"));
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(momentum[i], kMu * wide_g[0][i] + wide_g[1][i], 1e-6);  // μ·g1 + g2
}

TEST(Muon, RejectsMatrixParameterThatIsNot2D) {
  ParameterSet ps;
  ps.declare("conv_as_matrix", {2, 1, 4}, ParamRole::matrix, true);
  ps.finalize();
  fill_constant(ps.values(), 1.0);
  fill_constant(ps.grads(), 1.0);
  auto opt = make_optimizer(test_config(OptimizerKind::muon));
  try {
    opt->step(ps, 0.1);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("conv_as_matrix"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ps.values().data<float>()[0], 1.0f);
  EXPECT_EQ(opt->step_count(), 0);
}

// ---- state export / import ---------------------------------------------------------------------

struct TrainingRun {
  ParameterSet ps;
  std::unique_ptr<Optimizer> opt;
  explicit TrainingRun(OptimizerKind kind) : opt(make_optimizer(test_config(kind))) {
    ps.declare("embed", {5, 4}, ParamRole::embedding, true);
    ps.declare("layers.0.q_proj.weight", {4, 4}, ParamRole::matrix, true);
    ps.declare("layers.0.up_proj.weight", {6, 4}, ParamRole::matrix, true);
    ps.declare("layers.0.norm.weight", {4}, ParamRole::vector, false);
    ps.declare("lm_head", {5, 4}, ParamRole::head, true);
    ps.finalize();
    Rng rng(3);
    fill_normal(ps.values(), rng, 0.0, 0.5);
  }
  // Deterministic gradients that depend on the step.
  void step(int s) {
    Rng rng(100 + static_cast<uint64_t>(s));
    fill_normal(ps.grads(), rng, 0.0, 1.0);
    opt->step(ps, 0.01 / (1 + s));
  }
};

TEST(OptimizerState, ExportImportContinuesBitForBit) {
  for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::muon}) {
    SCOPED_TRACE(std::string(optimizer_kind_name(kind)));
    TrainingRun a(kind), b(kind);
    for (int s = 0; s < 3; ++s) a.step(s);
    const OptimizerState saved = a.opt->export_state();
    b.ps.values().copy_from(a.ps.values());
    b.opt->import_state(saved, b.ps);
    EXPECT_EQ(b.opt->step_count(), 3);

    for (int s = 3; s < 6; ++s) {
      a.step(s);
      b.step(s);
    }
    EXPECT_TRUE(bitwise_equal(a.ps.values(), b.ps.values()));
    const OptimizerState sa = a.opt->export_state(), sb = b.opt->export_state();
    ASSERT_EQ(sa.tensors.size(), sb.tensors.size());
    for (const auto& [name, t] : sa.tensors) EXPECT_TRUE(bitwise_equal(t, sb.tensors.at(name))) << name;
    // The exported copy is a snapshot: later steps did not change it.
    EXPECT_EQ(saved.step, 3);
    EXPECT_FALSE(bitwise_equal(saved.tensors.begin()->second, sa.tensors.at(saved.tensors.begin()->first)));
  }
}

TEST(OptimizerState, StateSavedBeforeTheFirstStepRoundTrips) {
  TrainingRun a(OptimizerKind::muon), b(OptimizerKind::muon);
  const OptimizerState empty = a.opt->export_state();
  EXPECT_EQ(empty.step, 0);
  EXPECT_TRUE(empty.tensors.empty());
  b.ps.values().copy_from(a.ps.values());
  b.opt->import_state(empty, b.ps);
  a.step(0);
  b.step(0);
  EXPECT_TRUE(bitwise_equal(a.ps.values(), b.ps.values()));
}

TEST(OptimizerState, BadStateIsRejectedAndChangesNothing) {
  TrainingRun a(OptimizerKind::muon);
  a.step(0);
  const OptimizerState good = a.opt->export_state();
  auto expect_rejected = [&](const OptimizerState& bad, const std::string& needle) {
    try {
      a.opt->import_state(bad, a.ps);
      ADD_FAILURE() << "accepted a bad state (" << needle << ")";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    const OptimizerState now = a.opt->export_state();
    EXPECT_EQ(now.step, good.step);
    for (const auto& [name, t] : good.tensors) EXPECT_TRUE(bitwise_equal(t, now.tensors.at(name))) << name;
  };

  OptimizerState wrong_kind = good;
  wrong_kind.kind = "adamw";
  expect_rejected(wrong_kind, "adamw");

  OptimizerState missing = good;
  missing.tensors.erase("muon.momentum/layers.0.up_proj.weight");
  expect_rejected(missing, "muon.momentum/layers.0.up_proj.weight");

  OptimizerState wrong_shape = good;
  wrong_shape.tensors["adamw.v/lm_head"] = Tensor::zeros({4, 5}, DType::f32);
  expect_rejected(wrong_shape, "adamw.v/lm_head");

  OptimizerState wrong_dtype = good;
  wrong_dtype.tensors["adamw.m/embed"] = Tensor::zeros({5, 4}, DType::f64);
  expect_rejected(wrong_dtype, "adamw.m/embed");

  OptimizerState unknown = good;
  unknown.tensors["adamw.m/layers.0.q_proj.weight"] = Tensor::zeros({4, 4}, DType::f32);  // a Muon matrix
  expect_rejected(unknown, "adamw.m/layers.0.q_proj.weight");

  OptimizerState negative_step = good;
  negative_step.step = -1;
  expect_rejected(negative_step, "step");
}

TEST(Optimizer, RefusesAnotherParameterSetAndBadLearningRate) {
  TrainingRun a(OptimizerKind::adamw);
  a.step(0);
  ParameterSet other;
  other.declare("embed", {5, 4}, ParamRole::embedding, true);
  other.finalize();
  EXPECT_THROW(a.opt->step(other, 0.01), std::invalid_argument);
  EXPECT_THROW(a.opt->step(a.ps, -1.0), std::invalid_argument);
  EXPECT_THROW(a.opt->step(a.ps, std::nan("")), std::invalid_argument);
  EXPECT_EQ(a.opt->step_count(), 1);
  ParameterSet bf(DType::bf16);
  bf.declare("x", {2}, ParamRole::vector, false);
  bf.finalize();
  EXPECT_THROW(make_optimizer(test_config(OptimizerKind::muon))->step(bf, 0.01), std::invalid_argument);
}

// ---- config ------------------------------------------------------------------------------------

TEST(OptimizerConfig, ValidationNamesTheField) {
  auto expect_field = [](OptimizerConfig c, const std::string& field) {
    try {
      make_optimizer(c);
      ADD_FAILURE() << "accepted bad " << field;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("optimizer." + field), std::string::npos) << e.what();
    }
  };
  OptimizerConfig c;
  EXPECT_NO_THROW(validate(c));
  OptimizerConfig bad = c;
  bad.lr = 0;
  expect_field(bad, "lr");
  bad = c;
  bad.beta2 = 1.0;
  expect_field(bad, "beta2");
  bad = c;
  bad.eps = -1;
  expect_field(bad, "eps");
  bad = c;
  bad.ns_steps = 0;
  expect_field(bad, "ns_steps");
  bad = c;
  bad.lr_min_ratio = 1.5;
  expect_field(bad, "lr_min_ratio");
  bad = c;
  bad.grad_clip = std::nan("");
  expect_field(bad, "grad_clip");

  EXPECT_EQ(parse_optimizer_kind("muon", "optimizer.kind"), OptimizerKind::muon);
  EXPECT_EQ(parse_lr_schedule_kind("wsd", "optimizer.schedule"), LrScheduleKind::wsd);
  try {
    parse_optimizer_kind("sgd", "optimizer.kind");
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer.kind"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("sgd"), std::string::npos);
  }
}

// ---- schedule ----------------------------------------------------------------------------------

TEST(LrSchedule, WarmupCosineKeySteps) {
  OptimizerConfig c;
  c.lr = 1e-3;
  c.lr_min_ratio = 0.1;
  c.warmup_steps = 10;
  const LrSchedule s(c, 110);  // 10 warmup + 100 decay steps
  EXPECT_DOUBLE_EQ(s.at(0), 1e-4);
  EXPECT_DOUBLE_EQ(s.at(4), 5e-4);
  EXPECT_DOUBLE_EQ(s.at(9), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(10), 1e-4 + 0.9e-3 * 0.5 * (1 + std::cos(std::numbers::pi / 100)));
  EXPECT_DOUBLE_EQ(s.at(59), 5.5e-4);  // halfway: p = 50/100
  EXPECT_DOUBLE_EQ(s.at(109), 1e-4);   // last step reaches the floor
  EXPECT_DOUBLE_EQ(s.at(1000), 1e-4);
  for (int64_t i = 10; i < 110; ++i) EXPECT_LE(s.at(i), s.at(i - 1));
  EXPECT_THROW(s.at(-1), std::invalid_argument);

  c.warmup_steps = 0;
  EXPECT_DOUBLE_EQ(LrSchedule(c, 100).at(0), 1e-4 + 0.9e-3 * 0.5 * (1 + std::cos(std::numbers::pi / 100)));
  c.warmup_steps = 200;
  EXPECT_THROW(LrSchedule(c, 100), std::invalid_argument);
  EXPECT_THROW(LrSchedule(c, 0), std::invalid_argument);
}

TEST(LrSchedule, ConstantAndWsd) {
  OptimizerConfig c;
  c.lr = 1e-3;
  c.lr_min_ratio = 0.1;
  c.warmup_steps = 10;
  c.schedule = LrScheduleKind::constant;
  const LrSchedule constant(c, 110);
  EXPECT_DOUBLE_EQ(constant.at(4), 5e-4);
  EXPECT_DOUBLE_EQ(constant.at(50), 1e-3);
  EXPECT_DOUBLE_EQ(constant.at(109), 1e-3);

  c.schedule = LrScheduleKind::wsd;
  c.wsd_decay_ratio = 0.2;  // 22 of 110 steps: decay over steps 88..109
  const LrSchedule wsd(c, 110);
  EXPECT_DOUBLE_EQ(wsd.at(4), 5e-4);
  EXPECT_DOUBLE_EQ(wsd.at(87), 1e-3);
  EXPECT_DOUBLE_EQ(wsd.at(88), 1e-3 - 0.9e-3 / 22);
  EXPECT_DOUBLE_EQ(wsd.at(98), 5.5e-4);
  EXPECT_DOUBLE_EQ(wsd.at(109), 1e-4);
  c.wsd_decay_ratio = 0.95;  // 10 warmup + 105 decay > 110
  EXPECT_THROW(LrSchedule(c, 110), std::invalid_argument);
}

// ---- gradient clipping -------------------------------------------------------------------------

TEST(GradClip, ClipsToMaxNormAndReturnsNormBeforeClipping) {
  ParameterSet ps(DType::f64);
  Parameter* a = ps.declare("a", {1}, ParamRole::vector, false);
  Parameter* b = ps.declare("b", {1}, ParamRole::matrix, true);
  ps.finalize();
  a->grad.data<double>()[0] = 3;
  b->grad.data<double>()[0] = -4;
  EXPECT_DOUBLE_EQ(clip_grad_norm(ps, 10.0), 5.0);  // below the limit: unchanged
  EXPECT_EQ(b->grad.data<double>()[0], -4.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm(ps, 0.0), 5.0);  // 0 disables
  EXPECT_EQ(a->grad.data<double>()[0], 3.0);

  EXPECT_DOUBLE_EQ(clip_grad_norm(ps, 1.0), 5.0);
  EXPECT_DOUBLE_EQ(a->grad.data<double>()[0], 3 / (5 + 1e-6));
  EXPECT_DOUBLE_EQ(b->grad.data<double>()[0], -4 / (5 + 1e-6));
  EXPECT_NEAR(grad_norm(ps), 1 / (1 + 2e-7), 1e-12);

  scale_grads(ps, 2.0);
  EXPECT_NEAR(grad_norm(ps), 2 / (1 + 2e-7), 1e-12);

  a->grad.data<double>()[0] = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isinf(clip_grad_norm(ps, 1.0)));
  EXPECT_TRUE(std::isinf(a->grad.data<double>()[0]));  // left for the caller to skip the step
  EXPECT_THROW(clip_grad_norm(ps, -1.0), std::invalid_argument);
}

TEST(GradClip, NormIsIndependentOfThreadCount) {
  ParameterSet ps;
  ps.declare("big", {1000, 777}, ParamRole::matrix, true);
  ps.finalize();
  Rng rng(5);
  fill_normal(ps.grads(), rng, 0.0, 1.0);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const double one = grad_norm(ps);
  omp_set_num_threads(3);
  const double three = grad_norm(ps);
  omp_set_num_threads(threads);
  EXPECT_EQ(one, three);
  double sum = 0;
  for (int64_t i = 0; i < ps.numel(); ++i) sum += std::pow(static_cast<double>(ps.grads().data<float>()[i]), 2);
  EXPECT_NEAR(one, std::sqrt(sum), 1e-9 * one);
}

TEST(GradClip, SumsOfSquaresOfSeveralTensorsAreEachSum) {
  Rng rng(6);
  const Tensor a = Tensor::empty({3, 40000}, DType::f32), b = Tensor::empty({5}, DType::f32);
  fill_normal(a, rng, 0.0, 1.0);
  fill_normal(b, rng, 0.0, 1.0);
  const std::vector<double> sums = ops::sums_of_squares({a, b, Tensor::zeros({0}, DType::f32)});
  ASSERT_EQ(sums.size(), 3u);
  EXPECT_EQ(sums[0], ops::sums_of_squares({a})[0]);
  EXPECT_EQ(sums[1], ops::sums_of_squares({b})[0]);
  EXPECT_EQ(sums[2], 0.0);
  EXPECT_TRUE(ops::sums_of_squares({}).empty());
}

}  // namespace
}  // namespace linea

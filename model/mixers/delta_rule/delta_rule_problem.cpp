#include "model/mixers/delta_rule/delta_rule_problem.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/hdf5_file.h"

namespace linea {

namespace {

// What the command expects of one dataset of IN.
enum class Presence { required, optional, forbidden };
struct DatasetRule {
  std::string name;
  Presence presence;
  Shape shape;         // in fla's layout (unused when forbidden)
  std::string layout;  // the shape in letters, e.g. "[B, T, H, K]"; for forbidden: why
};

// "[1, 0, 3]": the position of element `flat` of a row-major tensor of this shape.
std::string index_string(const Shape& shape, int64_t flat) {
  Shape index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_string(index);
}

// The first element that is not finite (or, for log decays, positive) and its value; index −1 if none.
template <class T>
std::pair<int64_t, double> first_invalid(const Tensor& t, bool log_decay) {
  const T* x = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (!std::isfinite(x[i]) || (log_decay && x[i] > 0)) return {i, static_cast<double>(x[i])};
  }
  return {-1, 0.0};
}

std::string describe(DType dtype, const Shape& shape) { return std::string(dtype_name(dtype)) + shape_string(shape); }

// Checks the datasets of one open input file, with messages naming the file and the dataset.
class InputChecker {
 public:
  InputChecker(const Hdf5File& file, const DeltaRulePreset& preset) : file_(file), preset_(preset) {}

  [[noreturn]] void fail(std::string_view dataset, std::string_view problem) const {
    throw std::invalid_argument("mixer input '" + file_.path().string() + "', dataset '" + std::string(dataset) +
                                "': " + std::string(problem));
  }

  // Info of a dataset that must exist with `dtype`; `expected` describes it for the message.
  Hdf5DatasetInfo require(const std::string& name, DType dtype, std::string_view expected) const {
    if (!file_.has_dataset(name)) fail(name, "missing; " + mixer() + " needs " + std::string(expected));
    const Hdf5DatasetInfo info = file_.dataset_info(name);
    if (info.dtype != dtype) {
      fail(name, "expected " + std::string(expected) + ", got " + describe(info.dtype, info.shape));
    }
    return info;
  }

  // Throws unless the dataset is present or absent, and shaped, as the rule says.
  void check(const DatasetRule& rule) const {
    const bool present = file_.has_dataset(rule.name);
    if (rule.presence == Presence::forbidden) {
      if (present) fail(rule.name, "does not belong to " + mixer() + ": " + rule.layout);
      return;
    }
    const std::string expected = describe(DType::f32, rule.shape) + " (" + rule.layout + ")";
    if (!present) {
      if (rule.presence == Presence::required) fail(rule.name, "missing; " + mixer() + " needs " + expected);
      return;
    }
    const Hdf5DatasetInfo info = file_.dataset_info(rule.name);
    if (info.dtype != DType::f32 || info.shape != rule.shape) {
      fail(rule.name, "expected " + expected + ", got " + describe(info.dtype, info.shape));
    }
  }

 private:
  std::string mixer() const { return preset_.name; }
  const Hdf5File& file_;
  const DeltaRulePreset& preset_;
};

}  // namespace

DeltaRuleFileProblem read_delta_rule_problem(const std::filesystem::path& path, const DeltaRulePreset& preset,
                                             DType compute) {
  if (compute != DType::f32 && compute != DType::f64) {
    throw std::invalid_argument("read_delta_rule_problem: compute dtype must be f32 or f64");
  }
  const Hdf5File file = Hdf5File::open(path);
  const InputChecker checker(file, preset);
  DeltaRuleFileProblem p;

  // q fixes B, T, H, K; v adds V; cu_seqlens (optional) the sequences.
  const Hdf5DatasetInfo q = checker.require("q", DType::f32, "f32[B, T, H, K]");
  if (q.shape.size() != 4) checker.fail("q", "expected rank 4 [B, T, H, K], got " + describe(q.dtype, q.shape));
  for (int64_t d : q.shape) {
    if (d <= 0) checker.fail("q", "every dimension of [B, T, H, K] must be positive, got " + shape_string(q.shape));
  }
  p.batch = q.shape[0], p.seq_len = q.shape[1], p.heads = q.shape[2], p.key_dim = q.shape[3];
  const std::string v_expected = "f32[" + std::to_string(p.batch) + ", " + std::to_string(p.seq_len) + ", " +
                                 std::to_string(p.heads) + ", V] ([B, T, H, V] with B, T, H from q)";
  const Hdf5DatasetInfo v = checker.require("v", DType::f32, v_expected);
  if (v.shape.size() != 4 || v.shape[0] != p.batch || v.shape[1] != p.seq_len || v.shape[2] != p.heads ||
      v.shape[3] <= 0) {
    checker.fail("v", "expected " + v_expected + ", got " + describe(v.dtype, v.shape));
  }
  p.value_dim = v.shape[3];

  p.packed = file.has_dataset("cu_seqlens");
  if (p.packed) {
    const Hdf5DatasetInfo cu = checker.require("cu_seqlens", DType::i64, "i64[S + 1]");
    if (cu.shape.size() != 1 || cu.shape[0] < 2) {
      checker.fail("cu_seqlens", "expected i64[S + 1] with S ≥ 1, got " + describe(cu.dtype, cu.shape));
    }
    if (p.batch != 1) {
      checker.fail("cu_seqlens", "packed sequences need B = 1, but q is " + shape_string(q.shape));
    }
    const Tensor offsets = file.read("cu_seqlens");
    p.seqs.cu_seqlens.assign(offsets.data<int64_t>(), offsets.data<int64_t>() + offsets.numel());
    try {
      p.seqs.validate(p.seq_len);
    } catch (const std::invalid_argument& e) {
      checker.fail("cu_seqlens", std::string(e.what()) + " (T of q)");
    }
  } else {
    p.seqs = SeqLayout::uniform(p.batch, p.seq_len);
  }

  const int64_t b = p.batch, t = p.seq_len, h = p.heads, k = p.key_dim, vd = p.value_dim, s = p.num_states();
  const std::string state_layout = p.packed ? "[S, H, K, V], S from cu_seqlens" : "[B, H, K, V]";
  p.spec = {preset.decay, preset.gate, 1.0 / std::sqrt(static_cast<double>(k))};
  const ops::DeltaRuleSpec& spec = p.spec;
  const bool beta_gate = spec.gate == ops::GateKind::beta;
  const std::vector<DatasetRule> rules = {
      {"k", Presence::required, {b, t, h, k}, "[B, T, H, K]"},
      {"beta",
       beta_gate ? Presence::required : Presence::forbidden,
       {b, t, h},
       beta_gate ? "[B, T, H]" : "gdn2 takes the erase gate 'b' [B, T, H, K] and write gate 'w' [B, T, H, V] instead"},
      {"b",
       beta_gate ? Presence::forbidden : Presence::required,
       {b, t, h, k},
       beta_gate ? "only gdn2 has the erase gate 'b'; this mixer takes 'beta' [B, T, H]" : "[B, T, H, K]"},
      {"w",
       beta_gate ? Presence::forbidden : Presence::required,
       {b, t, h, vd},
       beta_gate ? "only gdn2 has the write gate 'w'; this mixer takes 'beta' [B, T, H]" : "[B, T, H, V]"},
      spec.decay == ops::DecayKind::none
          ? DatasetRule{"g", Presence::forbidden, {}, "deltanet has no decay (gdn, kda and gdn2 take g)"}
      : spec.decay == ops::DecayKind::scalar
          ? DatasetRule{"g", Presence::required, {b, t, h}, "[B, T, H], one log decay per head"}
          : DatasetRule{"g", Presence::required, {b, t, h, k}, "[B, T, H, K], one log decay per key channel"},
      {"h0", Presence::optional, {s, h, k, vd}, state_layout},
      {"do", Presence::optional, {b, t, h, vd}, "[B, T, H, V]"},
      {"dht", Presence::optional, {s, h, k, vd}, state_layout},
  };
  for (const DatasetRule& rule : rules) checker.check(rule);

  // The layout is valid: read (checking the values), convert to the compute dtype, flatten tokens.
  const int64_t n = p.num_tokens();
  auto read = [&](const char* name, Shape flat) {
    const Tensor t = file.read(name, compute);
    const bool log_decay = std::string_view(name) == "g";
    const auto [index, value] =
        compute == DType::f32 ? first_invalid<float>(t, log_decay) : first_invalid<double>(t, log_decay);
    if (index >= 0) {
      checker.fail(name, std::string(log_decay ? "log decays must be finite and ≤ 0" : "values must be finite") +
                             ", got " + std::to_string(value) + " at " + index_string(t.shape(), index));
    }
    return t.reshape(std::move(flat));
  };
  p.in.q = read("q", {n, h, k});
  p.in.k = read("k", {n, h, k});
  p.in.v = read("v", {n, h, vd});
  if (beta_gate) {
    p.in.beta = read("beta", {n, h});
  } else {
    p.in.b = read("b", {n, h, k});
    p.in.w = read("w", {n, h, vd});
  }
  if (spec.decay == ops::DecayKind::scalar) p.in.g = read("g", {n, h});
  if (spec.decay == ops::DecayKind::channel) p.in.g = read("g", {n, h, k});
  if (file.has_dataset("h0")) p.in.h0 = read("h0", {s, h, k, vd});
  p.d_o = file.has_dataset("do") ? read("do", {n, h, vd}) : Tensor::zeros({n, h, vd}, compute);
  if (file.has_dataset("dht")) p.dht = read("dht", {s, h, k, vd});
  return p;
}

namespace {

constexpr const char* kHelp =
    R"(  --mixer  deltanet  no decay, scalar gate beta
           gdn       one log decay per head, beta
           kda       one log decay per key channel, beta
           gdn2      one log decay per key channel, erase gate b and write gate w instead of beta
  --impl   recurrent token by token, the reference; computed in f64
           chunked   the chunked (C = 64) training algorithm; computed in f32, as in training
           cuda      the chunked algorithm on the GPU (model/mixers/delta_rule/cuda/delta_rule.h): q, k,
                     v, the gates and do in --dtype, g, h0 and dht in f32, arithmetic in f32
  --dtype  f32 (default) or bf16: the GPU operands' dtype; only with --impl cuda

IN: f32 datasets (B batch, T tokens, H heads, K key dim, V value dim):
  q, k        [B, T, H, K]  used as given (normalise them beforehand); scale = 1/sqrt(K)
  v           [B, T, H, V]
  beta        [B, T, H]     deltanet, gdn, kda (not gdn2)
  b, w        [B, T, H, K] and [B, T, H, V]: gdn2 only
  g           log decay (≤ 0): [B, T, H] for gdn, [B, T, H, K] for kda and gdn2, absent for deltanet
  h0          [B, H, K, V]  initial state (optional: zeros)
  cu_seqlens  i64 [S + 1]   packed sequences (optional): then B = 1 and h0, dht are [S, H, K, V]
  do          [B, T, H, V]  dL/do (optional: zeros)
  dht         [B, H, K, V]  dL/dht (optional: zeros)
  Datasets with other names are ignored. A missing, misshapen or wrongly typed dataset, one the
  mixer does not take (beta for gdn2, b/w for the others, g for deltanet), a value that is not
  finite or a positive g is an error, and then nothing is written.

OUT: f32 datasets in the same layouts: o [B, T, H, V], ht (like h0), and the gradients of
  L = sum(o * do) + sum(ht * dht): dq, dk, dv, dbeta (gdn2: db, dw), dg (not deltanet), dh0.
  File attributes mixer, impl and compute_dtype say how OUT was made.
)";

// A host copy in f32 of a tensor of any floating dtype on any device.
Tensor as_f32(const Tensor& t) {
  if (t.dtype() == DType::f32 && t.device() == Device::cpu) return t;
  const Tensor host = t.clone();
  if (host.dtype() == DType::f32) return host;
  Tensor out = Tensor::empty(t.shape(), DType::f32);
  float* dst = out.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    dst[i] = host.dtype() == DType::bf16 ? static_cast<float>(host.data<bf16>()[i])
                                         : static_cast<float>(host.data<double>()[i]);
  }
  return out;
}

// A host f32 tensor copied to the GPU in `dtype` (f32 or bf16); undefined stays undefined.
Tensor to_gpu(const Tensor& t, DType dtype) {
  if (!t.defined()) return t;
  Tensor staged = t;
  if (dtype == DType::bf16) {
    staged = Tensor::empty(t.shape(), DType::bf16);
    for (int64_t i = 0; i < t.numel(); ++i) staged.data<bf16>()[i] = bf16(t.data<float>()[i]);
  }
  Tensor out = Tensor::empty(t.shape(), dtype, Device::cuda);
  out.copy_from(staged);
  return out;
}

// The problem on the GPU: token operands and do in `dtype`, g, h0 and dht in f32.
DeltaRuleFileProblem on_gpu(const DeltaRuleFileProblem& p, DType dtype) {
  DeltaRuleFileProblem g = p;
  for (Tensor* t : {&g.in.q, &g.in.k, &g.in.v, &g.in.beta, &g.in.b, &g.in.w, &g.d_o}) *t = to_gpu(*t, dtype);
  for (Tensor* t : {&g.in.g, &g.in.h0, &g.dht}) *t = to_gpu(*t, DType::f32);
  return g;
}

// Forward and backward of the problem; returns OUT's datasets in fla's layout, as f32.
// On the GPU (p already there) the gradients take their inputs' dtypes and the states are f32.
std::vector<std::pair<std::string, Tensor>> forward_backward(const DeltaRuleFileProblem& p, ops::DeltaRuleImpl impl) {
  const Device device = p.in.q.device();
  const DType dtype = p.in.q.dtype(), state = device == Device::cuda ? DType::f32 : dtype;
  const int64_t n = p.num_tokens(), h = p.heads, k = p.key_dim, v = p.value_dim, s = p.num_states();

  Tensor o = Tensor::empty({n, h, v}, dtype, device), ht = Tensor::empty({s, h, k, v}, state, device);
  ops::delta_rule_forward(impl, p.spec, p.seqs, p.in, o, ht);

  ops::DeltaRuleGrads grads;
  auto like = [&](const Tensor& t) { return t.defined() ? Tensor::empty(t.shape(), t.dtype(), device) : Tensor(); };
  grads.dq = like(p.in.q), grads.dk = like(p.in.k), grads.dv = like(p.in.v);
  grads.dbeta = like(p.in.beta), grads.db = like(p.in.b), grads.dw = like(p.in.w), grads.dg = like(p.in.g);
  grads.dh0 = Tensor::empty({s, h, k, v}, state, device);
  ops::delta_rule_backward(impl, p.spec, p.seqs, p.in, p.d_o, p.dht, grads);

  // Tensors over tokens go back from [N, ...] to [B, T, ...]; states stay [S, H, K, V].
  auto tokens = [&](const Tensor& t) {
    Shape shape{p.batch, p.seq_len};
    shape.insert(shape.end(), t.shape().begin() + 1, t.shape().end());
    return as_f32(t).reshape(shape);
  };
  std::vector<std::pair<std::string, Tensor>> out = {{"o", tokens(o)},         {"ht", as_f32(ht)},
                                                     {"dq", tokens(grads.dq)}, {"dk", tokens(grads.dk)},
                                                     {"dv", tokens(grads.dv)}, {"dh0", as_f32(grads.dh0)}};
  for (const auto& [name, grad] :
       {std::pair{"dbeta", grads.dbeta}, {"db", grads.db}, {"dw", grads.dw}, {"dg", grads.dg}}) {
    if (grad.defined()) out.emplace_back(name, tokens(grad));
  }
  return out;
}

class DeltaRuleProblemFormat final : public MixerProblemFormat {
 public:
  std::string_view help() const override { return kHelp; }

  MixerRun run(const std::filesystem::path& in, std::string_view mixer, MixerImpl impl,
               DType gpu_dtype) const override {
    const bool recurrent = impl == MixerImpl::recurrent;
    const DeltaRuleFileProblem p =
        read_delta_rule_problem(in, delta_rule_preset(mixer), recurrent ? DType::f64 : DType::f32);
    MixerRun run;
    run.datasets = forward_backward(impl == MixerImpl::cuda ? on_gpu(p, gpu_dtype) : p,
                                    recurrent ? ops::DeltaRuleImpl::recurrent : ops::DeltaRuleImpl::chunked);
    run.shape = "B=" + std::to_string(p.batch) + " T=" + std::to_string(p.seq_len) + " H=" + std::to_string(p.heads) +
                " K=" + std::to_string(p.key_dim) + " V=" + std::to_string(p.value_dim) + ", " +
                std::to_string(p.num_states()) + " sequences";
    return run;
  }
};

}  // namespace

const MixerProblemFormat& delta_rule_problem_format() {
  static const DeltaRuleProblemFormat format;
  return format;
}

}  // namespace linea

#include "cli/mixer_problem.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/hdf5_file.h"

namespace linea::cli {

DeltaMixer parse_delta_mixer(std::string_view name) {
  for (DeltaMixer m : {DeltaMixer::deltanet, DeltaMixer::gdn, DeltaMixer::kda, DeltaMixer::gdn2}) {
    if (delta_mixer_name(m) == name) return m;
  }
  throw std::invalid_argument("unknown mixer '" + std::string(name) + "'; expected deltanet, gdn, kda or gdn2");
}

std::string_view delta_mixer_name(DeltaMixer mixer) {
  switch (mixer) {
    case DeltaMixer::deltanet: return "deltanet";
    case DeltaMixer::gdn: return "gdn";
    case DeltaMixer::kda: return "kda";
    case DeltaMixer::gdn2: return "gdn2";
  }
  return "?";
}

ops::DeltaRuleSpec delta_mixer_spec(DeltaMixer mixer, int64_t key_dim) {
  ops::DeltaRuleSpec spec;
  spec.scale = 1.0 / std::sqrt(static_cast<double>(key_dim));
  switch (mixer) {
    case DeltaMixer::deltanet: spec.decay = ops::DecayKind::none; break;
    case DeltaMixer::gdn: spec.decay = ops::DecayKind::scalar; break;
    case DeltaMixer::kda: spec.decay = ops::DecayKind::channel; break;
    case DeltaMixer::gdn2:
      spec.decay = ops::DecayKind::channel;
      spec.gate = ops::GateKind::erase_write;
      break;
  }
  return spec;
}

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
  InputChecker(const Hdf5File& file, DeltaMixer mixer) : file_(file), mixer_(mixer) {}

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
  std::string mixer() const { return std::string(delta_mixer_name(mixer_)); }
  const Hdf5File& file_;
  DeltaMixer mixer_;
};

}  // namespace

MixerProblem read_mixer_problem(const std::filesystem::path& path, DeltaMixer mixer, DType compute) {
  if (compute != DType::f32 && compute != DType::f64) {
    throw std::invalid_argument("read_mixer_problem: compute dtype must be f32 or f64");
  }
  const Hdf5File file = Hdf5File::open(path);
  const InputChecker checker(file, mixer);
  MixerProblem p;

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
  const ops::DeltaRuleSpec spec = delta_mixer_spec(mixer, k);
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

}  // namespace linea::cli

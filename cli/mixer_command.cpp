// `linea mixer`: runs one delta-rule mixer (DeltaNet, GDN, KDA, GDN-2) forward and backward on
// tensors read from an HDF5 file in flash-linear-attention's layout, and writes the outputs and
// gradients to another HDF5 file, so that our kernels can be checked against fla (or anything else
// that writes the same datasets). The output file appears only when complete (tmp file + rename).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "checkpoint/hdf5_file.h"
#include "cli/command.h"
#include "cli/mixer_problem.h"
#include "data/atomic_file.h"
#include "kernels/delta_rule.h"

namespace linea::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kHelp =
    R"(usage: linea mixer --mixer deltanet|gdn|kda|gdn2 --impl recurrent|chunked --in IN.h5 --out OUT.h5

Runs one delta-rule mixer forward and backward on the tensors of IN (flash-linear-attention's
layout) and writes the outputs and the gradients to OUT.

  --mixer  deltanet  no decay, scalar gate beta
           gdn       one log decay per head, beta
           kda       one log decay per key channel, beta
           gdn2      one log decay per key channel, erase gate b and write gate w instead of beta
  --impl   recurrent token by token, the reference; computed in f64
           chunked   the chunked (C = 64) training algorithm; computed in f32, as in training
  --in     input HDF5 file (only read)
  --out    output HDF5 file, written to OUT.tmp-<pid> and renamed to OUT when complete, so that
           OUT is never left half-written (an existing OUT is replaced); must differ from IN

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

struct MixerOptions {
  bool help = false;
  DeltaMixer mixer = DeltaMixer::deltanet;
  ops::DeltaRuleImpl impl = ops::DeltaRuleImpl::recurrent;
  fs::path in, out;
};

MixerOptions parse_mixer_options(int argc, char** argv) {
  std::string mixer, impl, in, out;
  const std::pair<std::string_view, std::string*> flags[] = {
      {"--mixer", &mixer}, {"--impl", &impl}, {"--in", &in}, {"--out", &out}};
  MixerOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      options.help = true;
      return options;
    }
    const auto flag = std::find_if(std::begin(flags), std::end(flags), [&](const auto& f) { return f.first == arg; });
    if (flag == std::end(flags))
      throw std::invalid_argument("unknown argument '" + arg + "' (see `linea mixer --help`)");
    if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value (see `linea mixer --help`)");
    *flag->second = argv[++i];
  }
  std::string missing;
  for (const auto& [name, value] : flags) {
    if (value->empty()) missing += (missing.empty() ? "" : ", ") + std::string(name);
  }
  if (!missing.empty()) throw std::invalid_argument("missing " + missing + " (see `linea mixer --help`)");

  try {
    options.mixer = parse_delta_mixer(mixer);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("--mixer: ") + e.what());
  }
  if (impl == "recurrent") {
    options.impl = ops::DeltaRuleImpl::recurrent;
  } else if (impl == "chunked") {
    options.impl = ops::DeltaRuleImpl::chunked;
  } else {
    throw std::invalid_argument("--impl: unknown implementation '" + impl + "'; expected recurrent or chunked");
  }
  options.in = in;
  options.out = out;
  return options;
}

// Fails early (before any computing) on paths that cannot work.
void check_paths(const MixerOptions& options) {
  if (!fs::is_regular_file(options.in)) {
    throw std::invalid_argument("--in: '" + options.in.string() + "' is not an existing file");
  }
  const fs::path dir = options.out.has_parent_path() ? options.out.parent_path() : fs::path(".");
  if (!fs::is_directory(dir)) {
    throw std::invalid_argument("--out: directory '" + dir.string() + "' does not exist");
  }
  if (fs::is_directory(options.out)) {
    throw std::invalid_argument("--out: '" + options.out.string() + "' is a directory");
  }
  if (fs::exists(options.out) && fs::equivalent(options.in, options.out)) {
    throw std::invalid_argument("--out: '" + options.out.string() + "' is the input file; choose another path");
  }
}

Tensor as_f32(const Tensor& t) {
  if (t.dtype() == DType::f32) return t;
  Tensor out = Tensor::empty(t.shape(), DType::f32);
  const double* src = t.data<double>();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = static_cast<float>(src[i]);
  return out;
}

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Forward and backward of the problem; returns OUT's datasets in fla's layout, as f32.
NamedTensors run_mixer(const MixerProblem& p, DeltaMixer mixer, ops::DeltaRuleImpl impl) {
  const ops::DeltaRuleSpec spec = delta_mixer_spec(mixer, p.key_dim);
  const DType dtype = p.in.q.dtype();
  const int64_t n = p.num_tokens(), h = p.heads, k = p.key_dim, v = p.value_dim, s = p.num_states();

  Tensor o = Tensor::empty({n, h, v}, dtype), ht = Tensor::empty({s, h, k, v}, dtype);
  ops::delta_rule_forward(impl, spec, p.seqs, p.in, o, ht);

  ops::DeltaRuleGrads grads;
  auto like = [&](const Tensor& t) { return t.defined() ? Tensor::empty(t.shape(), dtype) : Tensor(); };
  grads.dq = like(p.in.q), grads.dk = like(p.in.k), grads.dv = like(p.in.v);
  grads.dbeta = like(p.in.beta), grads.db = like(p.in.b), grads.dw = like(p.in.w), grads.dg = like(p.in.g);
  grads.dh0 = Tensor::empty({s, h, k, v}, dtype);
  ops::delta_rule_backward(impl, spec, p.seqs, p.in, p.d_o, p.dht, grads);

  // Tensors over tokens go back from [N, ...] to [B, T, ...]; states stay [S, H, K, V].
  auto tokens = [&](const Tensor& t) {
    Shape shape{p.batch, p.seq_len};
    shape.insert(shape.end(), t.shape().begin() + 1, t.shape().end());
    return as_f32(t).reshape(shape);
  };
  NamedTensors out = {{"o", tokens(o)},         {"ht", as_f32(ht)},       {"dq", tokens(grads.dq)},
                      {"dk", tokens(grads.dk)}, {"dv", tokens(grads.dv)}, {"dh0", as_f32(grads.dh0)}};
  for (const auto& [name, grad] :
       {std::pair{"dbeta", grads.dbeta}, {"db", grads.db}, {"dw", grads.dw}, {"dg", grads.dg}}) {
    if (grad.defined()) out.emplace_back(name, tokens(grad));
  }
  return out;
}

// Writes the datasets and file attributes to `<out>.tmp-<pid>`, syncs it and renames it to `out`:
// `out` is either untouched or complete. The temporary file is removed on any failure.
void write_hdf5_atomically(const fs::path& out, const NamedTensors& datasets,
                           const std::vector<std::pair<std::string, std::string>>& attributes) {
  const fs::path tmp = out.string() + ".tmp-" + std::to_string(::getpid());
  try {
    Hdf5File file = Hdf5File::create(tmp, Hdf5File::Create::truncate);
    for (const auto& [name, tensor] : datasets) file.write(name, tensor);
    for (const auto& [name, value] : attributes) file.set_attribute("", name, value);
    file.close();
    data::fsync_path(tmp);
    fs::rename(tmp, out);
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
  data::fsync_path(out.has_parent_path() ? out.parent_path() : fs::path("."));
}

int run_mixer_command(int argc, char** argv) {
  const MixerOptions options = parse_mixer_options(argc, argv);
  if (options.help) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  check_paths(options);
  const bool recurrent = options.impl == ops::DeltaRuleImpl::recurrent;
  const DType compute = recurrent ? DType::f64 : DType::f32;
  const MixerProblem problem = read_mixer_problem(options.in, options.mixer, compute);
  const NamedTensors results = run_mixer(problem, options.mixer, options.impl);
  write_hdf5_atomically(options.out, results,
                        {{"mixer", std::string(delta_mixer_name(options.mixer))},
                         {"impl", recurrent ? "recurrent" : "chunked"},
                         {"compute_dtype", std::string(dtype_name(compute))}});
  std::printf("linea mixer: wrote %s (%s, %s in %s; B=%ld T=%ld H=%ld K=%ld V=%ld, %ld sequences)\n",
              options.out.c_str(), std::string(delta_mixer_name(options.mixer)).c_str(),
              recurrent ? "recurrent" : "chunked", std::string(dtype_name(compute)).c_str(),
              static_cast<long>(problem.batch), static_cast<long>(problem.seq_len), static_cast<long>(problem.heads),
              static_cast<long>(problem.key_dim), static_cast<long>(problem.value_dim),
              static_cast<long>(problem.num_states()));
  return 0;
}

const CommandRegistration kMixerCommand({"mixer",
                                         "run a delta-rule mixer forward + backward on an HDF5 file (fla layout)",
                                         run_mixer_command});

}  // namespace
}  // namespace linea::cli

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
#include "kernels/device_memory.h"
#include "model/mixers/delta_rule/delta_rule.h"

namespace linea::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kHelp =
    R"(usage: linea mixer --mixer deltanet|gdn|kda|gdn2 --impl recurrent|chunked|cuda [--dtype f32|bf16]
                   --in IN.h5 --out OUT.h5

Runs one delta-rule mixer forward and backward on the tensors of IN (flash-linear-attention's
layout) and writes the outputs and the gradients to OUT.

  --mixer  deltanet  no decay, scalar gate beta
           gdn       one log decay per head, beta
           kda       one log decay per key channel, beta
           gdn2      one log decay per key channel, erase gate b and write gate w instead of beta
  --impl   recurrent token by token, the reference; computed in f64
           chunked   the chunked (C = 64) training algorithm; computed in f32, as in training
           cuda      the chunked algorithm on the GPU (model/mixers/delta_rule/cuda/delta_rule.h): q, k, v, the gates
                     and do in --dtype, g, h0 and dht in f32, arithmetic in f32
  --dtype  f32 (default) or bf16: the GPU operands' dtype; only with --impl cuda
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
  bool cuda = false;         // --impl cuda: the chunked algorithm on the GPU
  DType dtype = DType::f32;  // the GPU operands' dtype
  fs::path in, out;
};

MixerOptions parse_mixer_options(int argc, char** argv) {
  std::string mixer, impl, in, out, dtype;
  const std::pair<std::string_view, std::string*> flags[] = {
      {"--mixer", &mixer}, {"--impl", &impl}, {"--in", &in}, {"--out", &out}, {"--dtype", &dtype}};
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
    if (value->empty() && value != &dtype) missing += (missing.empty() ? "" : ", ") + std::string(name);
  }
  if (!missing.empty()) throw std::invalid_argument("missing " + missing + " (see `linea mixer --help`)");

  try {
    options.mixer = parse_delta_mixer(mixer);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("--mixer: ") + e.what());
  }
  if (impl == "recurrent") {
    options.impl = ops::DeltaRuleImpl::recurrent;
  } else if (impl == "chunked" || impl == "cuda") {
    options.impl = ops::DeltaRuleImpl::chunked;
    options.cuda = impl == "cuda";
  } else {
    throw std::invalid_argument("--impl: unknown implementation '" + impl + "'; expected recurrent, chunked or cuda");
  }
  if (!dtype.empty()) {
    if (!options.cuda) throw std::invalid_argument("--dtype: only for --impl cuda (the CPU impls pick their own)");
    if (dtype == "f32") {
      options.dtype = DType::f32;
    } else if (dtype == "bf16") {
      options.dtype = DType::bf16;
    } else {
      throw std::invalid_argument("--dtype: unknown dtype '" + dtype + "'; expected f32 or bf16");
    }
  }
  options.in = in;
  options.out = out;
  return options;
}

// Fails early (before any computing) on paths that cannot work, and on --impl cuda without a GPU.
void check_paths(const MixerOptions& options) {
  if (options.cuda && !cuda_device_available()) {
#ifdef LINEA_WITH_CUDA
    throw std::runtime_error("--impl cuda: no CUDA device is visible");
#else
    throw std::runtime_error("--impl cuda: this build has no CUDA backend (configure with -DLINEA_CUDA=ON)");
#endif
  }
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
MixerProblem on_gpu(const MixerProblem& p, DType dtype) {
  MixerProblem g = p;
  for (Tensor* t : {&g.in.q, &g.in.k, &g.in.v, &g.in.beta, &g.in.b, &g.in.w, &g.d_o}) *t = to_gpu(*t, dtype);
  for (Tensor* t : {&g.in.g, &g.in.h0, &g.dht}) *t = to_gpu(*t, DType::f32);
  return g;
}

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Forward and backward of the problem; returns OUT's datasets in fla's layout, as f32.
// On the GPU (p already there) the gradients take their inputs' dtypes and the states are f32.
NamedTensors run_mixer(const MixerProblem& p, DeltaMixer mixer, ops::DeltaRuleImpl impl) {
  const ops::DeltaRuleSpec spec = delta_mixer_spec(mixer, p.key_dim);
  const Device device = p.in.q.device();
  const DType dtype = p.in.q.dtype(), state = device == Device::cuda ? DType::f32 : dtype;
  const int64_t n = p.num_tokens(), h = p.heads, k = p.key_dim, v = p.value_dim, s = p.num_states();

  Tensor o = Tensor::empty({n, h, v}, dtype, device), ht = Tensor::empty({s, h, k, v}, state, device);
  ops::delta_rule_forward(impl, spec, p.seqs, p.in, o, ht);

  ops::DeltaRuleGrads grads;
  auto like = [&](const Tensor& t) { return t.defined() ? Tensor::empty(t.shape(), t.dtype(), device) : Tensor(); };
  grads.dq = like(p.in.q), grads.dk = like(p.in.k), grads.dv = like(p.in.v);
  grads.dbeta = like(p.in.beta), grads.db = like(p.in.b), grads.dw = like(p.in.w), grads.dg = like(p.in.g);
  grads.dh0 = Tensor::empty({s, h, k, v}, state, device);
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
  const char* impl = options.cuda ? "cuda" : recurrent ? "recurrent" : "chunked";
  // compute_dtype: the dtype of the operands the kernels read (their arithmetic is f32 or f64 alike).
  const DType compute = recurrent ? DType::f64 : options.cuda ? options.dtype : DType::f32;
  const MixerProblem problem = read_mixer_problem(options.in, options.mixer, recurrent ? DType::f64 : DType::f32);
  const NamedTensors results =
      run_mixer(options.cuda ? on_gpu(problem, options.dtype) : problem, options.mixer, options.impl);
  write_hdf5_atomically(options.out, results,
                        {{"mixer", std::string(delta_mixer_name(options.mixer))},
                         {"impl", impl},
                         {"compute_dtype", std::string(dtype_name(compute))}});
  std::printf("linea mixer: wrote %s (%s, %s in %s; B=%ld T=%ld H=%ld K=%ld V=%ld, %ld sequences)\n",
              options.out.c_str(), std::string(delta_mixer_name(options.mixer)).c_str(), impl,
              std::string(dtype_name(compute)).c_str(), static_cast<long>(problem.batch),
              static_cast<long>(problem.seq_len), static_cast<long>(problem.heads), static_cast<long>(problem.key_dim),
              static_cast<long>(problem.value_dim), static_cast<long>(problem.num_states()));
  return 0;
}

const CommandRegistration kMixerCommand({"mixer",
                                         "run a delta-rule mixer forward + backward on an HDF5 file (fla layout)",
                                         run_mixer_command});

}  // namespace
}  // namespace linea::cli

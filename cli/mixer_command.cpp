// `linea mixer`: runs one mixer forward and backward on tensors read from an HDF5 file in
// flash-linear-attention's layout, and writes the outputs and gradients to another HDF5 file, so
// that our kernels can be checked against fla (or anything else that writes the same datasets).
// The mixers are those whose family has a problem format (model/mixer_problem.h; today the delta
// rule's deltanet, gdn, kda and gdn2). The output file appears only when complete (tmp file + rename).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/hdf5_file.h"
#include "cli/command.h"
#include "cli/command_line.h"
#include "data/atomic_file.h"
#include "kernels/device_memory.h"
#include "model/mixer_problem.h"
#include "model/mixer_registry.h"

namespace linea::cli {
namespace {

namespace fs = std::filesystem;

// The mixers `linea mixer` can run: those of the families with a problem format.
std::vector<std::string> runnable_mixers() {
  std::vector<std::string> names;
  for (const MixerFamily* family : mixer_families()) {
    if (family->problem_format()) names.insert(names.end(), family->mixers().begin(), family->mixers().end());
  }
  return names;
}

std::string help_text() {
  std::string names;
  for (const std::string& name : runnable_mixers()) names += (names.empty() ? "" : "|") + name;
  std::string help = "usage: linea mixer --mixer " + names +
                     R"( --impl recurrent|chunked|cuda [--dtype f32|bf16]
                   --in IN.h5 --out OUT.h5

Runs one mixer forward and backward on the tensors of IN (flash-linear-attention's layout) and
writes the outputs and the gradients to OUT.

  --in     input HDF5 file (only read)
  --out    output HDF5 file, written to OUT.tmp-<pid> and renamed to OUT when complete, so that
           OUT is never left half-written (an existing OUT is replaced); must differ from IN
)";
  for (const MixerFamily* family : mixer_families()) {
    if (family->problem_format()) help += std::string(family->problem_format()->help());
  }
  return help;
}

struct MixerOptions {
  std::string mixer;
  const MixerProblemFormat* format = nullptr;  // of the mixer's family
  MixerImpl impl = MixerImpl::recurrent;
  DType dtype = DType::f32;  // the GPU operands' dtype
  fs::path in, out;
};

MixerOptions mixer_options(const CommandLine& flags) {
  flags.require({"mixer", "impl", "in", "out"});
  const std::string mixer = *flags.get("mixer");
  const MixerFamily* family = find_mixer_family(mixer);
  if (!family || !family->problem_format()) {
    throw std::invalid_argument(
        "--mixer: " +
        std::string(family ? "mixer '" + mixer + "' has no problem format" : "unknown mixer '" + mixer + "'") +
        "; expected " + join_names(runnable_mixers(), " or "));
  }
  MixerOptions options;
  options.mixer = mixer;
  options.format = family->problem_format();
  const std::string impl = flags.choice("impl", "", {"recurrent", "chunked", "cuda"});
  options.impl = impl == "recurrent" ? MixerImpl::recurrent : impl == "chunked" ? MixerImpl::chunked : MixerImpl::cuda;
  if (flags.has("dtype")) {
    if (options.impl != MixerImpl::cuda)
      throw std::invalid_argument("--dtype: only for --impl cuda (the CPU impls pick their own)");
    options.dtype = flags.choice("dtype", "", {"f32", "bf16"}) == "bf16" ? DType::bf16 : DType::f32;
  }
  options.in = *flags.get("in");
  options.out = *flags.get("out");
  return options;
}

// Fails early (before any computing) on paths that cannot work, and on --impl cuda without a GPU.
void check_paths(const MixerOptions& options) {
  if (options.impl == MixerImpl::cuda && !cuda_device_available()) {
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

// Writes the datasets and file attributes to `<out>.tmp-<pid>`, syncs it and renames it to `out`:
// `out` is either untouched or complete. The temporary file is removed on any failure.
void write_hdf5_atomically(const fs::path& out, const std::vector<std::pair<std::string, Tensor>>& datasets,
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
  CommandLine flags("mixer", help_text());
  if (const auto done = flags.option({"mixer", "impl", "dtype", "in", "out"}).parse(argc, argv)) return *done;
  const MixerOptions options = mixer_options(flags);
  check_paths(options);
  const char* impl = options.impl == MixerImpl::cuda        ? "cuda"
                     : options.impl == MixerImpl::recurrent ? "recurrent"
                                                            : "chunked";
  // compute_dtype: the dtype of the operands the kernels read (their arithmetic is f32 or f64 alike).
  const DType compute = options.impl == MixerImpl::recurrent ? DType::f64
                        : options.impl == MixerImpl::cuda    ? options.dtype
                                                             : DType::f32;
  const MixerRun run = options.format->run(options.in, options.mixer, options.impl, options.dtype);
  write_hdf5_atomically(
      options.out, run.datasets,
      {{"mixer", options.mixer}, {"impl", impl}, {"compute_dtype", std::string(dtype_name(compute))}});
  std::printf("linea mixer: wrote %s (%s, %s in %s; %s)\n", options.out.c_str(), options.mixer.c_str(), impl,
              std::string(dtype_name(compute)).c_str(), run.shape.c_str());
  return 0;
}

const CommandRegistration kMixerCommand({"mixer", "run a mixer forward + backward on an HDF5 file (fla layout)",
                                         run_mixer_command});

}  // namespace
}  // namespace linea::cli

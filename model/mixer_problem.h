// MixerProblemFormat: what `linea mixer` needs of a mixer family to run one of its mixers forward
// and backward on tensors read from an HDF5 file in flash-linear-attention's layout, so that our
// kernels can be checked against fla (or anything else that writes the same datasets).
//
// run() checks every dataset before reading any (std::invalid_argument naming the file, the
// dataset and what was expected), and returns OUT's datasets, f32 in fla's layout. The command
// writes them (atomically) with the attributes mixer, impl and compute_dtype.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/tensor.h"

namespace linea {

// recurrent: token by token, the reference, in f64; chunked: the training algorithm on the CPU, in
// f32; cuda: the chunked algorithm on the GPU, token operands in the run's gpu dtype.
enum class MixerImpl { recurrent, chunked, cuda };

struct MixerRun {
  std::vector<std::pair<std::string, Tensor>> datasets;  // OUT's datasets, f32 host tensors
  std::string shape;  // the problem's sizes for the command's summary line ("B=2 T=70 H=2 …")
};

class MixerProblemFormat {
 public:
  virtual ~MixerProblemFormat() = default;
  // The family's part of `linea mixer --help`: its --mixer names, --impl and --dtype, IN and OUT.
  virtual std::string_view help() const = 0;
  // Reads `in` for `mixer` (one of the family's) and runs it with `impl`; gpu_dtype (f32 or bf16)
  // is the GPU operands' dtype under MixerImpl::cuda.
  virtual MixerRun run(const std::filesystem::path& in, std::string_view mixer, MixerImpl impl,
                       DType gpu_dtype) const = 0;
};

}  // namespace linea

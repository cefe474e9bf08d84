// MixerProblemFile: the checked reading of one `linea mixer` input file (model/mixer_problem.h) that
// every family's problem format shares. It opens the HDF5 file and checks datasets against rules
// before anything is read; every failure throws std::invalid_argument "mixer input 'FILE',
// dataset 'NAME': problem", with the mixer's name where it says what the mixer needs. Values are
// checked as they are read (finite; log decays ≤ 0). And the shared conversions of the formats:
// host f32 copies of results, GPU copies of operands, [N, ...] ↔ [B, T, ...]; and the run of a
// format over heads.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "checkpoint/hdf5_file.h"
#include "kernels/seq_layout.h"
#include "kernels/tensor.h"
#include "model/mixer_problem.h"

namespace linea {

enum class Presence { required, optional, forbidden };

// What a format expects of one dataset: its presence and, unless forbidden, its f32 shape in
// fla's layout; `layout` spells the shape in letters ("[B, T, H, K]") or, for a forbidden one, why.
struct DatasetRule {
  std::string name;
  Presence presence;
  Shape shape;
  std::string layout;
};

// The sizes of a problem over heads, from q [B, T, H, K] and v [B, T, H, V], and its sequences.
struct HeadProblemShape {
  int64_t batch = 0, seq_len = 0, heads = 0, key_dim = 0, value_dim = 0;  // B, T, H, K, V
  bool packed = false;  // cu_seqlens given: B = 1 and the T tokens hold seqs.num_seqs() sequences
  SeqLayout seqs;       // B sequences of T tokens, or cu_seqlens
  int64_t num_tokens() const { return batch * seq_len; }
  int64_t num_states() const { return seqs.num_seqs(); }  // S: one state per sequence
  // "B=2 T=70 H=2 K=16 V=32, 2 sequences"
  std::string summary() const;
  // "[S, H, K, V], S from cu_seqlens" or "[B, H, K, V]": the states' layout.
  std::string state_layout() const;
};

class MixerProblemFile {
 public:
  MixerProblemFile(const std::filesystem::path& path, std::string mixer);

  [[noreturn]] void fail(std::string_view dataset, std::string_view problem) const;
  bool has(const std::string& name) const { return file_.has_dataset(name); }
  // Info of a dataset that must exist with `dtype`; `expected` describes it for the message.
  Hdf5DatasetInfo require(const std::string& name, DType dtype, std::string_view expected) const;
  // A rank-`rank` f32 dataset of positive dimensions that fixes sizes (q: [B, T, H, K]).
  Shape require_leading(const std::string& name, size_t rank, std::string_view layout) const;
  // Throws unless the dataset is present or absent, and shaped, as the rule says.
  void check(const DatasetRule& rule) const;
  // cu_seqlens if present (then B must be 1: `leading` names the dataset that gave B and T, and
  // its shape), else B sequences of T tokens. packed says which.
  SeqLayout sequences(const std::string& leading, const Shape& leading_shape, bool& packed) const;
  // q and v checked, and the sequences (cu_seqlens or B × T).
  HeadProblemShape head_problem_shape() const;
  // A checked dataset, converted to `compute` (f32 or f64) and reshaped to `flat`; its values must
  // be finite (and ≤ 0 for a log decay).
  Tensor read(const std::string& name, DType compute, Shape flat, bool log_decay = false) const;
  // The optional datasets of every problem over heads, checked after the format's own (check) and
  // read after them: h0 and dht [S, H, K, V] as `shape`.state_layout() says (undefined when
  // absent), do [B, T, H, V] read as [N, H, V] (zeros when absent).
  void check_head_optionals(const HeadProblemShape& shape) const;
  void read_head_optionals(const HeadProblemShape& shape, DType compute, Tensor& h0, Tensor& d_o, Tensor& dht) const;

 private:
  Hdf5File file_;
  std::string mixer_;
};

// The buffers of a run of a problem over heads whose operands are on q's device: o [N, H, V] in q's
// dtype; ht and dh0 [S, H, K, V] in the state dtype (f32 on the GPU, else q's); like(t) an empty
// tensor of t's shape and dtype there (undefined for an undefined t), for t's gradient.
struct HeadRunBuffers {
  HeadRunBuffers(const HeadProblemShape& shape, const Tensor& q);
  Tensor like(const Tensor& t) const;

  Device device;
  Tensor o, ht, dh0;
};

// run() of a format over heads (the delta rule's, the GLA family's): the problem `read(compute)` in
// f64 for the recurrent reference and f32 otherwise, `on_gpu(problem, gpu_dtype)` under
// MixerImpl::cuda, then `forward_backward(problem, recurrent)` with the recurrent or the chunked
// algorithm; the run's shape is the problem's HeadProblemShape summary.
template <class Read, class OnGpu, class ForwardBackward>
MixerRun run_head_problem(MixerImpl impl, DType gpu_dtype, const Read& read, const OnGpu& on_gpu,
                          const ForwardBackward& forward_backward) {
  const bool recurrent = impl == MixerImpl::recurrent;
  const auto p = read(recurrent ? DType::f64 : DType::f32);
  MixerRun run;
  run.datasets = forward_backward(impl == MixerImpl::cuda ? on_gpu(p, gpu_dtype) : p, recurrent);
  run.shape = p.shape.summary();
  return run;
}

// "f32[2, 3]"
std::string dtype_shape_string(DType dtype, const Shape& shape);
// A host copy in f32 of a tensor of any floating dtype on any device.
Tensor host_f32(const Tensor& t);
// A host f32 tensor on the GPU in `dtype` (f32 or bf16); undefined stays undefined.
Tensor to_gpu(const Tensor& t, DType dtype);
// [N, ...] → [B, T, ...] (N = B·T), as a host f32 tensor.
Tensor tokens_to_batch(const Tensor& t, int64_t batch, int64_t seq_len);

}  // namespace linea

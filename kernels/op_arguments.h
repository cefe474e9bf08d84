// OpArguments: the checks every op of ops.h makes on its tensor arguments, then the dispatch on
// their element type.
//
// An op names itself, adds each tensor argument with the shape it expects (kAnyDim matches any
// extent) and calls dispatch(fn). Every failed check throws std::invalid_argument
// "OP: ARGUMENT: expected …, got …". The floating-point arguments of one call must all be defined
// (unless added as optional), share one dtype and one device: f32 or f64 on the CPU, f32 or bf16
// on CUDA. Statistics saved for backward (rstd) have the call's dtype, except in bf16 calls, where
// they are f32. Index arguments are i32 on that device. An op with a CUDA implementation checks
// on_cuda() and calls it; dispatch(fn) returns fn(float{}) or fn(double{}) for CPU tensors and
// throws std::runtime_error "OP: not implemented on cuda yet" for CUDA ones.
// Ops that mix dtypes (a mixer's bf16 token operands beside f32 log decays and states) state each
// argument's dtype themselves: typed() and optional_typed() check it exactly, on the call's one
// device; absent() rejects an argument the call's configuration does not take.
// While the op profile is on (op_profile.h), an OpArguments times its op's call, from its
// construction to its destruction at the op's return.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "kernels/op_profile.h"
#include "kernels/seq_layout.h"
#include "kernels/tensor.h"

namespace linea::ops {

inline constexpr int64_t kAnyDim = -1;

class OpArguments {
 public:
  explicit OpArguments(std::string op) : op_(std::move(op)) {}
  ~OpArguments();
  OpArguments(OpArguments&&) = default;  // ops that build their arguments in a helper return them
  OpArguments(const OpArguments&) = delete;
  OpArguments& operator=(const OpArguments&) = delete;

  // A floating-point tensor that must be defined and have `shape`.
  OpArguments& floating(const Tensor& t, std::string_view name, const Shape& shape);
  // The same, except that an undefined tensor is accepted (and then ignored).
  OpArguments& optional_floating(const Tensor& t, std::string_view name, const Shape& shape);
  // Per-row statistics saved for backward (rstd): the dtype of the floating-point arguments
  // added before it, or f32 when that dtype is bf16.
  OpArguments& statistics(const Tensor& t, std::string_view name, const Shape& shape);
  // An i32 tensor of `shape`.
  OpArguments& indices(const Tensor& t, std::string_view name, const Shape& shape);
  // A tensor of exactly `dtype` and `shape` on the call's device, defined (typed) or possibly not
  // (optional_typed: undefined is accepted and ignored). It does not set the dtype of floating().
  OpArguments& typed(const Tensor& t, std::string_view name, const Shape& shape, DType dtype);
  OpArguments& optional_typed(const Tensor& t, std::string_view name, const Shape& shape, DType dtype);
  // A tensor that must be undefined; `why` ends the message ("must be undefined for …").
  OpArguments& absent(const Tensor& t, std::string_view name, std::string_view why);
  // The buffer a forward saves its intermediates in for the backward (a mixer op's `saved`):
  // undefined, or at least `bytes` on the call's device, where `bytes` (what `sizer` returned, e.g.
  // "gla_saved_bytes") is not 0. Add it after the tensors that set the call's device.
  OpArguments& saved_buffer(const Tensor& saved, size_t bytes, std::string_view sizer);

  // Checks that heads ≥ 1 and that the last dimension of t (named `name`) splits into `heads`
  // equal parts; returns the part's width. `heads_name` names where the head count came from.
  int64_t head_width(const Tensor& t, std::string_view name, int64_t heads,
                     std::string_view heads_name = "heads") const;

  // Checks that `seqs` is a layout of `tokens` tokens (SeqLayout::validate); a failure names "seqs".
  void layout(const SeqLayout& seqs, int64_t tokens) const;

  // Throws "OP: NAME: MESSAGE" unless ok. The message is built before the call, whatever ok: in a
  // loop over elements test the condition and call fail() (copy_rows checked a pair per token that
  // way, at 0.4 µs a pair: most of a GPU prefill's time).
  void require(bool ok, std::string_view name, const std::string& message) const {
    if (!ok) fail(name, message);
  }
  [[noreturn]] void fail(std::string_view name, const std::string& message) const;
  // Every value of the i32 tensor `t` lies in [lo, hi) (or is `allowed`, e.g. −1 for ignored).
  // A CUDA tensor is copied to the host for the check (a synchronisation).
  void require_indices_in_range(const Tensor& t, std::string_view name, int64_t lo, int64_t hi,
                                std::optional<int64_t> allowed = std::nullopt) const;

  // True when the tensors are on a CUDA device.
  bool on_cuda() const { return device_ == Device::cuda; }

  template <class Fn>
  decltype(auto) dispatch(Fn&& fn) const {
    if (!dtype_) fail("arguments", "no floating-point tensor to dispatch on");
    if (device_ != Device::cpu) throw std::runtime_error(op_ + ": not implemented on cuda yet");
    if (*dtype_ == DType::f32) return fn(float{});
    return fn(double{});
  }

 private:
  void check_shape(const Tensor& t, std::string_view name, const Shape& shape) const;
  void check_device(const Tensor& t, std::string_view name);

  OpSpan span_;  // first: the span opens before the checks
  std::string op_;
  std::optional<DType> dtype_;  // of the first floating-point argument
  std::string dtype_from_;      // that argument's name
  std::optional<Device> device_;
  std::string device_from_;
  std::string profiled_shapes_;  // the first two tensor arguments, while span_ is timed
  std::string profiled_dtype_;   // the first one's element type (when no floating() sets dtype_)
  int profiled_tensors_ = 0;
};

}  // namespace linea::ops

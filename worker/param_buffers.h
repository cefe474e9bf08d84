// ParamBuffers: one optimizer buffer per selected parameter (AdamW's m or v, Muon's momentum),
// shaped and typed like its parameter, on its device, zero at the start, and named
// "<prefix>/<parameter name>" in an OptimizerState (whose tensors are host copies: export copies
// device→host, import host→device). The first bind() fixes the parameter set; later calls refuse
// any other set (other names, shapes, dtype or device) with std::invalid_argument.
#pragma once
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "model/parameters.h"
#include "worker/optimizer.h"

namespace linea {

using ParamSelector = std::function<bool(const Parameter&)>;

class ParamBuffers {
 public:
  ParamBuffers(std::string prefix, ParamSelector selected);

  // Allocates zero buffers on the first call (params must be finalized, f32 or f64 on the CPU, f32 on
  // a GPU);
  // afterwards only checks that params is laid out as the set bound first.
  void bind(const ParameterSet& params);
  // Forgets the buffers; the next bind() starts from zeros.
  void clear();
  // Buffer of params.params()[index] of the bound set; undefined when that parameter is not selected.
  const Tensor& at(size_t index) const { return buffers_.at(index); }

  // Adds a deep copy of every buffer to `tensors` (nothing before the first bind()).
  void export_to(std::map<std::string, Tensor>& tensors) const;
  // Throws std::invalid_argument unless `tensors` holds a tensor of the right shape and dtype for
  // every selected parameter of `params`.
  void check_importable(const std::map<std::string, Tensor>& tensors, const ParameterSet& params) const;
  // Whether `name` is the name of one of this object's buffers for `params`.
  bool expects(const std::string& name, const ParameterSet& params) const;
  // Binds to params afresh and copies the tensors in; call check_importable() first.
  void import_from(const std::map<std::string, Tensor>& tensors, const ParameterSet& params);

 private:
  std::string buffer_name(const Parameter& p) const { return prefix_ + "/" + p.name; }
  std::string prefix_;
  ParamSelector selected_;
  bool bound_ = false;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
  std::vector<std::string> names_;  // every parameter of the bound set, in order
  std::vector<Shape> shapes_;
  std::vector<Tensor> buffers_;  // one per parameter of the bound set; undefined where not selected
};

// The import_state() of an optimizer made of `buffers`: checks the kind, the step count and every
// tensor (all present and well-formed, none unknown; or none at all when state.step == 0), and only
// then loads them. Returns the step count to continue from.
int64_t import_param_buffers(const OptimizerState& state, OptimizerKind kind, const ParameterSet& params,
                             std::initializer_list<ParamBuffers*> buffers);

}  // namespace linea

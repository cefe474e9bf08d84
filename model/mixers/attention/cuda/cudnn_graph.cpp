#include "model/mixers/attention/cuda/cudnn_graph.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "kernels/cuda/check.h"

namespace linea::cuda::cudnn {

namespace {

std::string last_error() {
  char message[2048] = {};
  cudnnGetLastErrorString(message, sizeof(message));
  return message;
}

// The attributes that cuDNN 9.14 still needs and later versions mark deprecated (in favour of a
// device-property descriptor): the handle of an operation graph and of an execution plan.
constexpr auto kGraphHandle = static_cast<cudnnBackendAttributeName_t>(800);  // CUDNN_ATTR_OPERATIONGRAPH_HANDLE
constexpr auto kPlanHandle = static_cast<cudnnBackendAttributeName_t>(400);   // CUDNN_ATTR_EXECUTION_PLAN_HANDLE

}  // namespace

void check(cudnnStatus_t status, const std::string& what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  const std::string detail = last_error();
  throw Error(what + ": " + cudnnGetErrorString(status) + (detail.empty() ? "" : " (" + detail + ")"));
}

int64_t version() { return static_cast<int64_t>(cudnnGetVersion()); }

std::string version_string() {
  const int64_t v = version();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

cudnnHandle_t handle() {
  struct Handles {
    std::map<int, cudnnHandle_t> by_device;
    ~Handles() {
      for (auto& [device, h] : by_device) cudnnDestroy(h);
    }
  };
  thread_local Handles handles;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice (cuDNN handle)");
  auto it = handles.by_device.find(device);
  if (it != handles.by_device.end()) return it->second;
  cudnnHandle_t h = nullptr;
  check(cudnnCreate(&h), "cudnnCreate");
  handles.by_device.emplace(device, h);
  return h;
}

Descriptor::Descriptor(cudnnBackendDescriptorType_t type, std::string name) : name_(std::move(name)) {
  check(cudnnBackendCreateDescriptor(type, &desc_), "cudnnBackendCreateDescriptor (" + name_ + ")");
}

Descriptor::Descriptor(Descriptor&& other) noexcept : desc_(other.desc_), name_(std::move(other.name_)) {
  other.desc_ = nullptr;
}

Descriptor::~Descriptor() {
  if (desc_) cudnnBackendDestroyDescriptor(desc_);
}

Descriptor& Descriptor::set(cudnnBackendAttributeName_t attribute, cudnnBackendAttributeType_t type, int64_t count,
                            const void* values) {
  check(cudnnBackendSetAttribute(desc_, attribute, type, count, values),
        "cudnnBackendSetAttribute (" + name_ + ", attribute " + std::to_string(static_cast<int>(attribute)) + ")");
  return *this;
}

Descriptor& Descriptor::set(cudnnBackendAttributeName_t attribute, const Descriptor& value) {
  cudnnBackendDescriptor_t d = value.get();
  return set(attribute, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
}

Descriptor& Descriptor::set(cudnnBackendAttributeName_t attribute, int64_t value) {
  return set(attribute, CUDNN_TYPE_INT64, 1, &value);
}

Descriptor& Descriptor::set(cudnnBackendAttributeName_t attribute, const std::vector<int64_t>& values) {
  return set(attribute, CUDNN_TYPE_INT64, static_cast<int64_t>(values.size()), values.data());
}

Descriptor& Descriptor::set(cudnnBackendAttributeName_t attribute, cudnnDataType_t value) {
  return set(attribute, CUDNN_TYPE_DATA_TYPE, 1, &value);
}

Descriptor& Descriptor::set(cudnnBackendAttributeName_t attribute, bool value) {
  return set(attribute, CUDNN_TYPE_BOOLEAN, 1, &value);
}

Descriptor& Descriptor::finalize() {
  check(cudnnBackendFinalize(desc_), "cudnnBackendFinalize (" + name_ + ")");
  return *this;
}

Descriptor& OpGraph::keep(cudnnBackendDescriptorType_t type, std::string name) {
  return descriptors_.emplace_back(type, std::move(name));
}

TensorRef OpGraph::tensor(const TensorSpec& spec) {
  const int64_t uid = spec.uid != 0 ? spec.uid : next_uid_++;
  Descriptor& d = keep(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor " + std::to_string(uid));
  d.set(CUDNN_ATTR_TENSOR_DATA_TYPE, spec.type)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, spec.dims)
      .set(CUDNN_ATTR_TENSOR_STRIDES, spec.strides)
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, int64_t{16})
      .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, spec.is_virtual);
  if (spec.by_value) d.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, true);
  if (spec.ragged) d.set(CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, *spec.ragged->desc);
  d.finalize();
  return {&d, uid, spec.type, spec.dims, spec.strides};
}

TensorRef OpGraph::virtual_like(const TensorRef& like, cudnnDataType_t type) {
  return tensor({.type = type, .dims = like.dims, .strides = like.strides});
}

TensorRef OpGraph::pointwise(cudnnPointwiseMode_t mode, const TensorRef& x, const TensorRef* b, const TensorRef* t,
                             const TensorRef& y, cudnnDataType_t math, int64_t axis) {
  const std::string name = "pointwise " + std::to_string(static_cast<int>(mode)) + " → " + std::to_string(y.uid);
  Descriptor& pw = keep(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, name);
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode).set(CUDNN_ATTR_POINTWISE_MATH_PREC, math);
  if (mode == CUDNN_POINTWISE_GEN_INDEX) pw.set(CUDNN_ATTR_POINTWISE_AXIS, axis);
  pw.finalize();
  Descriptor& op = keep(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "operation " + name);
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
      .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, *x.desc)
      .set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, *y.desc);
  if (b) op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b->desc);
  if (t) op.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t->desc);
  const float one = 1.0f;
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one)
      .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one)
      .finalize();
  operations_.push_back(&op);
  return y;
}

TensorRef OpGraph::matmul(const TensorRef& a, const TensorRef& b, const TensorRef& c, const TensorRef* m_override,
                          const TensorRef* n_override, const TensorRef* k_override) {
  const std::string name = "matmul → " + std::to_string(c.uid);
  Descriptor& mm = keep(CUDNN_BACKEND_MATMUL_DESCRIPTOR, name);
  mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT).finalize();
  Descriptor& op = keep(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "operation " + name);
  op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, *a.desc)
      .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, *b.desc)
      .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, *c.desc)
      .set(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
  if (m_override) op.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, *m_override->desc);
  if (n_override) op.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, *n_override->desc);
  if (k_override) op.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, *k_override->desc);
  op.finalize();
  operations_.push_back(&op);
  return c;
}

TensorRef OpGraph::reduction(cudnnReduceTensorOp_t reduce, const TensorRef& x, const TensorRef& y) {
  const std::string name = "reduction " + std::to_string(static_cast<int>(reduce)) + " → " + std::to_string(y.uid);
  Descriptor& red = keep(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, name);
  red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce)
      .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT)
      .finalize();
  Descriptor& op = keep(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "operation " + name);
  op.set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, *x.desc)
      .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, *y.desc)
      .set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red)
      .finalize();
  operations_.push_back(&op);
  return y;
}

TensorRef OpGraph::reshape(const TensorRef& x, const TensorRef& y) {
  Descriptor& op = keep(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "operation reshape → " + std::to_string(y.uid));
  op.set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, *x.desc).set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, *y.desc).finalize();
  operations_.push_back(&op);
  return y;
}

Descriptor device_description(const std::string& json) {
  Descriptor d(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, "device description");
  d.set(CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, static_cast<int64_t>(json.size()), json.data())
      .finalize();
  return d;
}

namespace {

// What cuDNN says of an engine configuration: its engine's global index, whether the engine is
// marked nondeterministic, and the knob choices (informational and for telling configurations
// apart: a failed query leaves the defaults).
void describe_config(cudnnBackendDescriptor_t config, const std::string& what, OpGraph::Plan& plan) {
  Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR, what + " engine");
  cudnnBackendDescriptor_t engine_raw = engine.get();
  int64_t got = 0;
  if (cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got,
                               &engine_raw) == CUDNN_STATUS_SUCCESS) {
    cudnnBackendGetAttribute(engine_raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, &plan.engine);
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    int64_t note_count = 0;
    if (cudnnBackendGetAttribute(engine_raw, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &note_count, notes) == CUDNN_STATUS_SUCCESS) {
      for (int64_t n = 0; n < note_count; ++n)
        plan.nondeterministic |= notes[n] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
    }
  }
  // The knob choices come back into descriptors the caller creates, one per possible knob.
  std::vector<Descriptor> choices;
  std::vector<cudnnBackendDescriptor_t> raw;
  choices.reserve(CUDNN_KNOB_TYPE_COUNTS);
  for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; ++i) {
    raw.push_back(choices.emplace_back(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, what + " knob choice").get());
  }
  int64_t count = 0;
  if (cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               CUDNN_KNOB_TYPE_COUNTS, &count, raw.data()) != CUDNN_STATUS_SUCCESS) {
    return;
  }
  for (int64_t i = 0; i < std::min<int64_t>(count, CUDNN_KNOB_TYPE_COUNTS); ++i) {
    cudnnBackendKnobType_t type = CUDNN_KNOB_TYPE_COUNTS;
    int64_t value = 0;
    if (cudnnBackendGetAttribute(raw[static_cast<size_t>(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1,
                                 &got, &type) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(raw[static_cast<size_t>(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1,
                                 &got, &value) != CUDNN_STATUS_SUCCESS) {
      continue;
    }
    plan.knobs +=
        (plan.knobs.empty() ? "k" : " k") + std::to_string(static_cast<int>(type)) + "=" + std::to_string(value);
  }
}

std::string mib(int64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

}  // namespace

std::string OpGraph::Plan::name() const {
  return "engine " + std::to_string(engine) + (knobs.empty() ? "" : " (" + knobs + ")");
}

OpGraph::Candidates OpGraph::build_plans(const Target& target, const std::string& what, int64_t max_plans,
                                         int64_t max_workspace_bytes) {
  Descriptor& graph = keep(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, what + " operation graph");
  std::vector<cudnnBackendDescriptor_t> ops;
  for (const Descriptor* op : operations_) ops.push_back(op->get());
  if (target.handle) graph.set(kGraphHandle, CUDNN_TYPE_HANDLE, 1, &target.handle);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(ops.size()), ops.data())
      .finalize();

  Candidates found;
  std::string refusals;        // every step's answer, for the error when no configuration finalizes
  std::set<std::string> seen;  // the configurations seen (Plan::name: engine and knob choices)
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    if (static_cast<int64_t>(found.plans.size()) >= max_plans) break;
    const std::string mode_name = mode == CUDNN_HEUR_MODE_A ? "heuristics A" : "fallback heuristics";
    try {
      Descriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, what + " " + mode_name);
      heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
          .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
      if (target.device) heuristics.set(CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, *target.device);
      heuristics.finalize();
      int64_t count = 0;
      check(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                     &count, nullptr),
            what + " " + mode_name + ": result count");
      std::vector<std::unique_ptr<Descriptor>> configs;
      std::vector<cudnnBackendDescriptor_t> raw;
      for (int64_t i = 0; i < count; ++i) {
        configs.push_back(std::make_unique<Descriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                                                       what + " engine config " + std::to_string(i)));
        raw.push_back(configs.back()->get());
      }
      int64_t returned = 0;
      if (count > 0) {
        check(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                       count, &returned, raw.data()),
              what + " " + mode_name + ": results");
      }
      if (returned == 0) refusals += "; " + mode_name + ": no engine";
      for (int64_t i = 0; i < returned && static_cast<int64_t>(found.plans.size()) < max_plans; ++i) {
        Plan candidate;
        describe_config(raw[static_cast<size_t>(i)], what, candidate);
        const std::string label = mode_name + " engine config " + std::to_string(i) + " (" + candidate.name() + ")";
        if (candidate.engine >= 0 && !seen.insert(candidate.name()).second) continue;  // seen before
        try {
          candidate.plan = std::make_unique<Descriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, what + " plan");
          Descriptor& plan = *candidate.plan;
          if (target.device) {
            plan.set(CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, *target.device);
          } else {
            plan.set(kPlanHandle, CUDNN_TYPE_HANDLE, 1, &target.handle);
          }
          plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *configs[static_cast<size_t>(i)]).finalize();
          check(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                         nullptr, &candidate.workspace_bytes),
                what + ": plan workspace size");
        } catch (const Error& e) {
          refusals += "; " + label + ": " + e.what();
          found.skipped += "; " + label + ": " + e.what();
          continue;
        }
        if (!found.plans.empty() && candidate.workspace_bytes > max_workspace_bytes) {
          found.skipped +=
              "; " + label + ": workspace " + mib(candidate.workspace_bytes) + " > " + mib(max_workspace_bytes);
          continue;
        }
        found.plans.push_back(std::move(candidate));
      }
    } catch (const Error& e) {
      refusals += std::string("; ") + e.what();
    }
  }
  if (found.plans.empty()) throw Error(what + ": no execution plan" + refusals);
  if (!found.skipped.empty()) found.skipped.erase(0, 2);
  return found;
}

void execute(cudnnHandle_t h, const Descriptor& plan, const std::vector<int64_t>& uids,
             const std::vector<void*>& pointers, void* workspace, const std::string& what) {
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, what + " variant pack");
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids)
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(pointers.size()),
           pointers.data())
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace)
      .finalize();
  check(cudnnBackendExecute(h, plan.get(), pack.get()), what + ": cudnnBackendExecute");
}

}  // namespace linea::cuda::cudnn

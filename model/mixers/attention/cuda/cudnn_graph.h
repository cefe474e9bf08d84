// A thin, checked layer over cuDNN's backend graph API (cudnn_graph.h): descriptors that destroy
// themselves, an operation graph that numbers its tensors, execution plans of the engine
// configurations cuDNN's heuristics rank (the first, or several for the caller to time), and the
// calling thread's handle. Every failure becomes a cudnn::Error whose message
// names the step and carries cuDNN's status string and its last error message
// (cudnnGetLastErrorString), so that a graph cuDNN refuses says why.
// Built only with cuDNN (CMake LINEA_CUDNN); the handle runs on the default stream.
#pragma once
#include <cudnn.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace linea::cuda::cudnn {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws Error("what: STATUS (last error)") unless status is CUDNN_STATUS_SUCCESS.
void check(cudnnStatus_t status, const std::string& what);

// cudnnGetVersion() (9.14.0 → 91400) and as "9.14.0".
int64_t version();
std::string version_string();

// The calling thread's handle for its current device, created on first use.
cudnnHandle_t handle();

class Descriptor {
 public:
  Descriptor(cudnnBackendDescriptorType_t type, std::string name);
  ~Descriptor();
  Descriptor(Descriptor&& other) noexcept;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return desc_; }
  const std::string& name() const { return name_; }
  Descriptor& set(cudnnBackendAttributeName_t attribute, cudnnBackendAttributeType_t type, int64_t count,
                  const void* values);
  Descriptor& set(cudnnBackendAttributeName_t attribute, const Descriptor& value);
  Descriptor& set(cudnnBackendAttributeName_t attribute, int64_t value);
  Descriptor& set(cudnnBackendAttributeName_t attribute, const std::vector<int64_t>& values);
  Descriptor& set(cudnnBackendAttributeName_t attribute, cudnnDataType_t value);
  Descriptor& set(cudnnBackendAttributeName_t attribute, bool value);
  Descriptor& finalize();

 private:
  cudnnBackendDescriptor_t desc_ = nullptr;
  std::string name_;
};

// What plans are built for: the calling thread's device (its handle), or a device described by
// cuDNN's JSON device properties (CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, cuDNN 9.8 and newer) so
// that a machine without that GPU can build and check them (they cannot run there).
struct Target {
  cudnnHandle_t handle = nullptr;
  const Descriptor* device = nullptr;
};
Descriptor device_description(const std::string& json);

// A tensor of an operation graph: its descriptor and what the graph's operations need to know.
struct TensorRef {
  const Descriptor* desc = nullptr;
  int64_t uid = 0;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  std::vector<int64_t> dims, strides;
};

struct TensorSpec {
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  std::vector<int64_t> dims, strides;
  bool is_virtual = true;
  bool by_value = false;              // a host scalar, passed in the variant pack by address
  const TensorRef* ragged = nullptr;  // per-batch element offsets (THD layouts)
  int64_t uid = 0;                    // 0: the graph numbers it
};

// Builds the operations of one cuDNN operation graph, in order; keeps every descriptor alive for
// as long as plans made from it run.
class OpGraph {
 public:
  TensorRef tensor(const TensorSpec& spec);
  // A virtual output shaped like `like`, of dtype `type`.
  TensorRef virtual_like(const TensorRef& like, cudnnDataType_t type);

  // y = mode(x[, b[, t]]) with arithmetic in `math`; `axis` for GEN_INDEX.
  TensorRef pointwise(cudnnPointwiseMode_t mode, const TensorRef& x, const TensorRef* b, const TensorRef* t,
                      const TensorRef& y, cudnnDataType_t math = CUDNN_DATA_FLOAT, int64_t axis = -1);
  // c = a · b (batched over the leading dims) with f32 accumulation; the optional overrides
  // give per-batch row, column and contraction counts (padded layouts).
  TensorRef matmul(const TensorRef& a, const TensorRef& b, const TensorRef& c, const TensorRef* m_override = nullptr,
                   const TensorRef* n_override = nullptr, const TensorRef* k_override = nullptr);
  TensorRef reduction(cudnnReduceTensorOp_t op, const TensorRef& x, const TensorRef& y);
  TensorRef reshape(const TensorRef& x, const TensorRef& y);

  // An execution plan of the graph and what cuDNN says of its engine configuration.
  struct Plan {
    std::unique_ptr<Descriptor> plan;
    int64_t workspace_bytes = 0;
    int64_t engine = -1;  // cuDNN's global engine index (-1: cuDNN did not say)
    std::string knobs;    // the configuration's knob choices, "k<knob type>=<value>" each, in cuDNN's order
    bool nondeterministic = false;
    // "engine 8 (k40=3 k41=2)": the engine index and knob choices (cudnn-frontend's plan tags say
    // the same as "eng8_k40=3_k41=2").
    std::string name() const;
  };
  // The plans of the engine configurations that cuDNN's heuristics rank for the graph on `target`
  // (mode A, then the fallback list; a configuration with the engine and knob choices of one seen
  // before counts once), in that order, as far as they finalize: at most `max_plans`. The first
  // that finalizes is always kept (the heuristics' choice; max_plans = 1 gives it alone), every
  // later one only when its workspace is at most `max_workspace_bytes`. Finalizes the operation
  // graph for `target`: call it once per OpGraph. `skipped` lists, "; "-separated, the
  // configurations left out and why (failed to finalize, too much workspace). Throws Error listing
  // what each step answered when no configuration finalizes.
  struct Candidates {
    std::vector<Plan> plans;
    std::string skipped;
  };
  Candidates build_plans(const Target& target, const std::string& what, int64_t max_plans, int64_t max_workspace_bytes);

 private:
  Descriptor& keep(cudnnBackendDescriptorType_t type, std::string name);
  std::deque<Descriptor> descriptors_;
  std::vector<const Descriptor*> operations_;
  int64_t next_uid_ = 1000;  // callers number their own tensors below this
};

// Runs `plan` on `h` with the tensors uids[i] at pointers[i] and `workspace` (may be null when the
// plan needs none).
void execute(cudnnHandle_t h, const Descriptor& plan, const std::vector<int64_t>& uids,
             const std::vector<void*>& pointers, void* workspace, const std::string& what);

}  // namespace linea::cuda::cudnn

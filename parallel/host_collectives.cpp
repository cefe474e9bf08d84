#include "parallel/host_collectives.h"

#include <stdexcept>
#include <string>

namespace linea {
namespace {

void check_host(const Tensor& t, const char* who) {
  if (t.device() != Device::cpu)
    throw std::invalid_argument(std::string(who) + ": expected a CPU tensor, got " + t.describe());
}

Tensor device_copy(const Tensor& host, Device device) {
  Tensor t = Tensor::empty(host.shape(), host.dtype(), device);
  t.copy_from(host);
  return t;
}

}  // namespace

void all_reduce_host(Communicator& comm, const Tensor& x, ReduceOp op) {
  check_host(x, "all_reduce_host");
  if (comm.device() == Device::cpu) return comm.all_reduce(x, op);
  const Tensor staged = device_copy(x, comm.device());
  comm.all_reduce(staged, op);
  comm.synchronize();
  Tensor(x).copy_from(staged);  // a handle: writes x's memory
}

void all_gather_host(Communicator& comm, const Tensor& input, const Tensor& output) {
  check_host(input, "all_gather_host");
  check_host(output, "all_gather_host");
  if (comm.device() == Device::cpu) return comm.all_gather(input, output);
  const Tensor staged_in = device_copy(input, comm.device());
  const Tensor staged_out = Tensor::empty(output.shape(), output.dtype(), comm.device());
  comm.all_gather(staged_in, staged_out);
  comm.synchronize();
  Tensor(output).copy_from(staged_out);
}

}  // namespace linea

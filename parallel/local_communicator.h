// LocalCommunicator: the Communicator of a group of one process, with no engine underneath — what a
// single-process run (no MPI, ProcessGrid with one rank) uses, on CPU or GPU tensors alike.
// With one rank every reduction is the identity (sum and mean of one value are that value), a
// gather or scatter is a copy (none when in place), broadcast and barrier do nothing, and
// send/recv have no peer to name (the argument checks reject them).
#pragma once
#include "parallel/communicator.h"

namespace linea {

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::string name, Device device, CommunicatorOptions options = {});
  std::string_view backend() const override { return "local"; }
  Device device() const override { return device_; }

 protected:
  void do_all_reduce(const Tensor& x, ReduceOp op) override;
  void do_reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) override;
  void do_all_gather(const Tensor& input, const Tensor& output) override;
  void do_broadcast(const Tensor& x, int root) override;
  void do_send(const Tensor& x, int peer) override;
  void do_recv(const Tensor& x, int peer) override;
  void do_barrier() override;

 private:
  Device device_;
};

}  // namespace linea

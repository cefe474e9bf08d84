// ProcessGrid: how the ranks of a job are arranged, and a Communicator along each axis.
//
// world = DP × TP, TP groups made of consecutive ranks:
//   world_rank = dp_rank · tp + tp_rank
// The TP group of a rank is the tp ranks with its dp_rank; its DP group is the dp ranks with its
// tp_rank. Launchers place consecutive ranks on one node (mpirun fills a node's slots first), so
// each TP group sits inside a node when the ranks per node are a multiple of tp; create() checks
// this and reports a TP group split across nodes as an error. The local rank (this rank's place
// among the ranks of its node, from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)) picks the GPU.
//
// Every error in create() — a layout that does not multiply to the world size, ranks asking for
// different layouts, a TP group across nodes, too few GPUs — is thrown on every rank with the same
// message (std::invalid_argument), so no rank is left waiting for the others.
// Without MPI (MpiSession in single-process mode) the grid has one rank, layout 1 × 1, and
// LocalCommunicators. GPU communicators (NCCL, or local with one process) exist after enable_cuda().
#pragma once
#include <mpi.h>

#include <array>
#include <memory>
#include <string>

#include "parallel/communicator.h"
#include "parallel/mpi_comm.h"

namespace linea {

struct GridLayout {
  int tp = 1;  // tensor-parallel ranks per group
  int dp = 0;  // data-parallel replicas; 0: world size / tp
};

enum class GridAxis { world, tp, dp };
std::string_view grid_axis_name(GridAxis axis);

class ProcessGrid {
 public:
  // Collective over `parent` when MPI is running (each rank of it must call, with the same layout).
  static ProcessGrid create(GridLayout layout, CommunicatorOptions options = {}, MPI_Comm parent = MPI_COMM_WORLD);

  bool uses_mpi() const { return uses_mpi_; }
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  int tp_rank() const { return world_rank_ % tp_size_; }
  int tp_size() const { return tp_size_; }
  int dp_rank() const { return world_rank_ / tp_size_; }
  int dp_size() const { return world_size_ / tp_size_; }
  int local_rank() const { return local_rank_; }  // among the ranks of `parent` on this node
  int local_size() const { return local_size_; }
  const CommunicatorOptions& options() const { return options_; }

  // The communicator along `axis` for tensors on `device`. Device::cuda needs enable_cuda() first.
  Communicator& comm(GridAxis axis, Device device = Device::cpu);

  // Collective: selects GPU local_rank() for the calling thread (an error on every rank when the
  // node has fewer GPUs than ranks) and makes the GPU communicators. Returns the GPU index.
  int enable_cuda();
  int cuda_device() const { return cuda_device_; }  // -1 before enable_cuda()

  std::string describe() const;  // e.g. "rank 3 of 4 = dp 2 × tp 2 (dp 1, tp 1), local rank 3 of 4"

 private:
  ProcessGrid() = default;
  MPI_Comm group(GridAxis axis) const { return groups_[static_cast<size_t>(axis)].get(); }

  bool uses_mpi_ = false;
  int world_rank_ = 0, world_size_ = 1, tp_size_ = 1;
  int local_rank_ = 0, local_size_ = 1;
  int cuda_device_ = -1;
  CommunicatorOptions options_;
  std::array<MpiComm, 3> groups_;  // MPI groups by GridAxis (under MPI)
  std::array<std::unique_ptr<Communicator>, 3> cpu_;
  std::array<std::unique_ptr<Communicator>, 3> cuda_;
};

}  // namespace linea

#include "parallel/process_grid.h"

#include <stdexcept>
#include <vector>

#include "parallel/error_agreement.h"
#include "parallel/local_communicator.h"
#include "parallel/mpi_communicator.h"
#include "parallel/mpi_error.h"
#include "parallel/mpi_wait.h"

#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/runtime.h"
#include "parallel/cuda/nccl_communicator.h"
#endif

namespace linea {

namespace {

constexpr std::array<GridAxis, 3> kAxes = {GridAxis::world, GridAxis::tp, GridAxis::dp};

std::string layout_string(int tp, int dp) { return "tp=" + std::to_string(tp) + " × dp=" + std::to_string(dp); }

// The layout's error for a world of `world_size` ranks, or "" when it fits (dp is resolved).
std::string check_layout(GridLayout& layout, int world_size) {
  if (layout.tp < 1 || layout.dp < 0) {
    return "layout " + layout_string(layout.tp, layout.dp) + ": tp must be >= 1 and dp >= 0 (0: world size / tp)";
  }
  if (layout.dp == 0) {
    if (world_size % layout.tp != 0) {
      return "tp=" + std::to_string(layout.tp) + " does not divide the world size " + std::to_string(world_size);
    }
    layout.dp = world_size / layout.tp;
  }
  if (static_cast<int64_t>(layout.tp) * layout.dp != world_size) {
    return "layout " + layout_string(layout.tp, layout.dp) + " needs " + std::to_string(layout.tp * layout.dp) +
           " ranks but the world has " + std::to_string(world_size) +
           "; choose tp × dp = " + std::to_string(world_size);
  }
  return {};
}

}  // namespace

std::string_view grid_axis_name(GridAxis axis) {
  switch (axis) {
    case GridAxis::world: return "world";
    case GridAxis::tp: return "tp";
    case GridAxis::dp: return "dp";
  }
  return "?";
}

ProcessGrid ProcessGrid::create(GridLayout layout, CommunicatorOptions options, MPI_Comm parent) {
  ProcessGrid grid;
  grid.options_ = options;
  if (!mpi_is_initialized()) {
    if (const std::string error = check_layout(layout, 1); !error.empty()) {
      throw std::invalid_argument("ProcessGrid: " + error + " (this process runs alone, without MPI; start " +
                                  "it with mpirun to get more ranks)");
    }
    for (GridAxis axis : kAxes) {
      grid.cpu_[static_cast<size_t>(axis)] =
          std::make_unique<LocalCommunicator>(std::string(grid_axis_name(axis)), Device::cpu, options);
    }
    return grid;
  }

  grid.uses_mpi_ = true;
  grid.world_rank_ = comm_rank(parent);
  grid.world_size_ = comm_size(parent);

  // 1. Every rank must ask for the same layout; otherwise all of them say so.
  int mine[2] = {layout.tp, layout.dp};
  std::vector<int> all(2 * static_cast<size_t>(grid.world_size_));
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, parent, &request),
            "ProcessGrid: MPI_Iallgather of the layouts");
  wait_one(request, options.timeout, "ProcessGrid: comparing the layouts asked for by each rank");
  std::string disagreement;
  for (int r = 0; r < grid.world_size_; ++r) {
    if (all[2 * r] != all[0] || all[2 * r + 1] != all[1]) {
      disagreement += "; rank " + std::to_string(r) + " asks " + layout_string(all[2 * r], all[2 * r + 1]);
    }
  }
  if (!disagreement.empty()) {
    throw std::invalid_argument("ProcessGrid: ranks disagree on the layout: rank 0 asks " +
                                layout_string(all[0], all[1]) + disagreement);
  }

  // 2. The layout must fit the world (the same verdict on every rank, since the layouts agree).
  if (const std::string error = check_layout(layout, grid.world_size_); !error.empty()) {
    throw std::invalid_argument("ProcessGrid: " + error);
  }
  grid.tp_size_ = layout.tp;

  // 3. Node-local rank, and the groups along each axis.
  const MpiComm node = MpiComm::split_shared_memory(parent, grid.world_rank_, "ProcessGrid node");
  grid.local_rank_ = node.rank();
  grid.local_size_ = node.size();
  int node_id = grid.world_rank_;  // the lowest world rank on this node
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, &node_id, 1, MPI_INT, MPI_MIN, node.get(), &request),
            "ProcessGrid: MPI_Iallreduce of the node id");
  wait_one(request, options.timeout, "ProcessGrid: agreeing on a node id");

  grid.groups_[0] = MpiComm::duplicate(parent, "ProcessGrid world");
  grid.groups_[1] = MpiComm::split(parent, grid.dp_rank(), grid.tp_rank(), "ProcessGrid tp");
  grid.groups_[2] = MpiComm::split(parent, grid.tp_rank(), grid.dp_rank(), "ProcessGrid dp");

  // 4. Each TP group must sit inside one node.
  std::vector<int> tp_nodes(static_cast<size_t>(grid.tp_size_));
  check_mpi(MPI_Iallgather(&node_id, 1, MPI_INT, tp_nodes.data(), 1, MPI_INT, grid.group(GridAxis::tp), &request),
            "ProcessGrid: MPI_Iallgather of node ids in the tp group");
  wait_one(request, options.timeout, "ProcessGrid: comparing node ids in the tp group");
  std::string local_error;
  for (int node_of_peer : tp_nodes) {
    if (node_of_peer != node_id) {
      local_error = "the tp group of dp rank " + std::to_string(grid.dp_rank()) + " spans nodes (" +
                    std::to_string(grid.local_size_) + " ranks on this node, tp=" + std::to_string(grid.tp_size_) +
                    "); give every node a multiple of tp ranks, placed consecutively";
      break;
    }
  }
  if (const std::string errors = gather_errors(parent, local_error, options.timeout); !errors.empty()) {
    throw std::invalid_argument("ProcessGrid: " + errors);
  }

  for (GridAxis axis : kAxes) {
    grid.cpu_[static_cast<size_t>(axis)] =
        std::make_unique<MpiCommunicator>(grid.group(axis), std::string(grid_axis_name(axis)), options);
  }
  return grid;
}

Communicator& ProcessGrid::comm(GridAxis axis, Device device) {
  auto& comms = device == Device::cpu ? cpu_ : cuda_;
  Communicator* c = comms[static_cast<size_t>(axis)].get();
  if (!c) {
    throw std::logic_error("ProcessGrid::comm(" + std::string(grid_axis_name(axis)) +
                           ", cuda): call enable_cuda() before asking for GPU communicators");
  }
  return *c;
}

int ProcessGrid::enable_cuda() {
  if (cuda_device_ >= 0) return cuda_device_;
#ifdef LINEA_WITH_CUDA
  const int devices = cuda::device_count();
  std::string local_error;
  if (devices < local_size_) {
    local_error = "this node has " + std::to_string(devices) + " visible GPU(s) for " + std::to_string(local_size_) +
                  " ranks; start at most one rank per GPU";
  }
  if (uses_mpi_) {
    if (const std::string errors = gather_errors(group(GridAxis::world), local_error, options_.timeout);
        !errors.empty()) {
      throw std::invalid_argument("ProcessGrid::enable_cuda: " + errors);
    }
  } else if (!local_error.empty()) {
    throw std::invalid_argument("ProcessGrid::enable_cuda: " + local_error);
  }
  cuda::set_device(local_rank_);
  for (GridAxis axis : kAxes) {
    const std::string name(grid_axis_name(axis));
    if (uses_mpi_) {
      cuda_[static_cast<size_t>(axis)] = std::make_unique<NcclCommunicator>(group(axis), name, options_);
    } else {
      cuda_[static_cast<size_t>(axis)] = std::make_unique<LocalCommunicator>(name, Device::cuda, options_);
    }
  }
  cuda_device_ = local_rank_;
  return cuda_device_;
#else
  throw std::runtime_error("ProcessGrid::enable_cuda: this build of linea has no CUDA backend");
#endif
}

std::string ProcessGrid::describe() const {
  return "rank " + std::to_string(world_rank_) + " of " + std::to_string(world_size_) + " = dp " +
         std::to_string(dp_size()) + " × tp " + std::to_string(tp_size_) + " (dp " + std::to_string(dp_rank()) +
         ", tp " + std::to_string(tp_rank()) + "), local rank " + std::to_string(local_rank_) + " of " +
         std::to_string(local_size_) + (uses_mpi_ ? "" : ", without MPI");
}

}  // namespace linea

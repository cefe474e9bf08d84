// MpiComm: sole owner of an MPI communicator handle, freed (MPI_Comm_free) when destroyed; move-only.
// MPI_COMM_WORLD, MPI_COMM_SELF and MPI_COMM_NULL are never freed, nor is anything once MPI has
// been finalised. The factories report failures as MpiError (mpi_error.h).
#pragma once
#include <mpi.h>

#include <string_view>

namespace linea {

// MPI_Comm_rank / MPI_Comm_size of any communicator handle, errors as MpiError.
int comm_rank(MPI_Comm comm);
int comm_size(MPI_Comm comm);

class MpiComm {
 public:
  MpiComm() = default;
  explicit MpiComm(MPI_Comm comm) : comm_(comm) {}
  ~MpiComm() { reset(); }
  MpiComm(MpiComm&& other) noexcept : comm_(other.comm_) { other.comm_ = MPI_COMM_NULL; }
  MpiComm& operator=(MpiComm&& other) noexcept;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  // MPI_Comm_dup: same group, separate message space.
  static MpiComm duplicate(MPI_Comm comm, std::string_view what);
  // MPI_Comm_split: ranks with equal color form one communicator, ordered by key.
  static MpiComm split(MPI_Comm comm, int color, int key, std::string_view what);
  // MPI_Comm_split_type(MPI_COMM_TYPE_SHARED): the ranks that share this node's memory.
  static MpiComm split_shared_memory(MPI_Comm comm, int key, std::string_view what);

  MPI_Comm get() const { return comm_; }
  // Forgets the handle without freeing it. For a communicator left with operations that cannot
  // complete (after a timeout): Open MPI's progress engine may still touch it, so freeing is unsafe.
  void leak() { comm_ = MPI_COMM_NULL; }
  int rank() const { return comm_rank(comm_); }
  int size() const { return comm_size(comm_); }

 private:
  void reset();
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace linea

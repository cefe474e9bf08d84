// SharedDirectory: one fresh temporary directory for all ranks of an MPI test (they run on one
// machine under ctest): rank 0 makes it and tells the others its path; rank 0 removes it, after
// every rank is done with it, when the object goes out of scope (a collective destructor).
#pragma once
#include <mpi.h>

#include <filesystem>
#include <optional>
#include <string>

#include "tests/testing/temp_dir.h"

namespace linea::testing {

class SharedDirectory {
 public:
  explicit SharedDirectory(MPI_Comm comm = MPI_COMM_WORLD) : comm_(comm) {
    int rank = 0;
    MPI_Comm_rank(comm_, &rank);
    if (rank == 0) own_.emplace();
    std::string text = own_ ? own_->path().string() : std::string();
    int length = static_cast<int>(text.size());
    MPI_Bcast(&length, 1, MPI_INT, 0, comm_);
    text.resize(static_cast<size_t>(length));
    MPI_Bcast(text.data(), length, MPI_CHAR, 0, comm_);
    path_ = text;
  }
  SharedDirectory(const SharedDirectory&) = delete;
  SharedDirectory& operator=(const SharedDirectory&) = delete;
  ~SharedDirectory() { MPI_Barrier(comm_); }  // then rank 0's TempDir removes it

  const std::filesystem::path& path() const { return path_; }

 private:
  MPI_Comm comm_;
  std::optional<TempDir> own_;
  std::filesystem::path path_;
};

}  // namespace linea::testing

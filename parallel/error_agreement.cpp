#include "parallel/error_agreement.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/mpi_error.h"
#include "parallel/mpi_wait.h"

namespace linea {

namespace {

// "ranks 0, 2: <message>; rank 1: <other message>" from each rank's message ("" for none), or
// "all N ranks: <message>".
std::string combine_errors(const std::vector<std::string>& per_rank) {
  std::vector<std::pair<std::string, std::vector<int>>> messages;  // each distinct message once, with its ranks
  for (size_t r = 0; r < per_rank.size(); ++r) {
    if (per_rank[r].empty()) continue;
    auto it = std::find_if(messages.begin(), messages.end(), [&](const auto& m) { return m.first == per_rank[r]; });
    if (it == messages.end()) it = messages.insert(messages.end(), {per_rank[r], {}});
    it->second.push_back(static_cast<int>(r));
  }
  if (messages.size() == 1 && messages[0].second.size() == per_rank.size() && per_rank.size() > 1) {
    return "all " + std::to_string(per_rank.size()) + " ranks: " + messages[0].first;
  }
  std::string combined;
  for (const auto& [text, ranks] : messages) {
    if (!combined.empty()) combined += "; ";
    combined += ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) combined += (i ? ", " : "") + std::to_string(ranks[i]);
    combined += ": " + text;
  }
  return combined;
}

}  // namespace

std::string gather_errors(MPI_Comm comm, std::string_view local_error, std::chrono::milliseconds timeout) {
  int size = 0;
  check_mpi(MPI_Comm_size(comm, &size), "gather_errors: MPI_Comm_size");
  // Lengths first, then the texts themselves (most often all empty, and the second step is skipped).
  int length = static_cast<int>(local_error.size());
  std::vector<int> lengths(static_cast<size_t>(size));
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm, &request),
            "gather_errors: MPI_Iallgather");
  wait_one(request, timeout, "gather_errors: exchanging error lengths");

  std::vector<int> displacements(static_cast<size_t>(size));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    displacements[static_cast<size_t>(r)] = total;
    total += lengths[static_cast<size_t>(r)];
  }
  if (total == 0) return {};
  std::string texts(static_cast<size_t>(total), '\0');
  check_mpi(MPI_Iallgatherv(local_error.data(), length, MPI_CHAR, texts.data(), lengths.data(), displacements.data(),
                            MPI_CHAR, comm, &request),
            "gather_errors: MPI_Iallgatherv");
  wait_one(request, timeout, "gather_errors: exchanging error messages");

  std::vector<std::string> per_rank(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    per_rank[static_cast<size_t>(r)] = texts.substr(static_cast<size_t>(displacements[static_cast<size_t>(r)]),
                                                    static_cast<size_t>(lengths[static_cast<size_t>(r)]));
  }
  return combine_errors(per_rank);
}

std::string agree_on_errors(Communicator& comm, std::string_view local_error) {
  const int size = comm.size();
  Tensor length = Tensor::empty({1}, DType::i64);
  length.data<int64_t>()[0] = static_cast<int64_t>(local_error.size());
  Tensor lengths = Tensor::empty({size}, DType::i64);
  comm.all_gather(length, lengths);
  const int64_t* all_lengths = lengths.data<int64_t>();
  const int64_t longest = *std::max_element(all_lengths, all_lengths + size);
  if (longest == 0) return {};
  // Texts travel as i64 words (the communicators carry no byte type), each padded to the longest.
  const int64_t words = (longest + 7) / 8;
  Tensor text = Tensor::zeros({words}, DType::i64);
  std::memcpy(text.raw(), local_error.data(), local_error.size());
  Tensor texts = Tensor::empty({size * words}, DType::i64);
  comm.all_gather(text, texts);
  std::vector<std::string> per_rank(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    per_rank[static_cast<size_t>(r)].assign(static_cast<const char*>(texts.raw()) + r * words * 8,
                                            static_cast<size_t>(all_lengths[r]));
  }
  return combine_errors(per_rank);
}

bool PendingErrors::alone() const { return group_.size() == 1; }

void PendingErrors::agree(std::string_view context) {
  if (alone()) return;
  const std::string errors = agree_on_errors(group_, error_);
  error_.clear();
  if (!errors.empty()) throw AgreedError(std::string(context) + ": " + errors);
}

}  // namespace linea

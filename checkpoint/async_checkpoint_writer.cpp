#include "checkpoint/async_checkpoint_writer.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace linea {

namespace {

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Host-to-host copy split across OpenMP threads: one thread cannot saturate memory bandwidth,
// and this copy is the whole time the training loop is blocked.
void parallel_copy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kBlock = size_t{8} << 20;
  const int64_t blocks = static_cast<int64_t>((bytes + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const size_t begin = static_cast<size_t>(b) * kBlock;
    std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin,
                std::min(kBlock, bytes - begin));
  }
}

bool same_layout(const std::vector<std::pair<std::string, Tensor>>& a,
                 const std::vector<std::pair<std::string, Tensor>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || a[i].second.shape() != b[i].second.shape() ||
        a[i].second.dtype() != b[i].second.dtype()) {
      return false;
    }
  }
  return true;
}

}  // namespace

AsyncCheckpointWriter::AsyncCheckpointWriter(std::filesystem::path root, int keep_last)
    : root_(std::move(root)), keep_last_(keep_last) {
  if (keep_last < 1) throw std::invalid_argument("AsyncCheckpointWriter: keep_last must be >= 1");
}

AsyncCheckpointWriter::~AsyncCheckpointWriter() { wait(); }

void AsyncCheckpointWriter::wait() {
  if (thread_.joinable()) thread_.join();
}

std::optional<std::string> AsyncCheckpointWriter::last_error() const {
  std::lock_guard lock(mutex_);
  return last_error_;
}

CheckpointWriteStats AsyncCheckpointWriter::last_stats() const {
  std::lock_guard lock(mutex_);
  return last_stats_;
}

void AsyncCheckpointWriter::save(const CheckpointState& state) {
  validate_checkpoint_state(state, keep_last_);
  const auto start = std::chrono::steady_clock::now();
  wait();
  CheckpointWriteStats stats;
  stats.step = state.step;
  stats.waiting_ms = milliseconds_since(start);
  snapshot(state);
  for (const auto& [name, tensor] : snapshot_.tensors) stats.bytes += static_cast<int64_t>(tensor.nbytes());
  stats.blocked_ms = milliseconds_since(start);
  busy_ = true;
  thread_ = std::thread(&AsyncCheckpointWriter::write, this, stats);
}

void AsyncCheckpointWriter::snapshot(const CheckpointState& state) {
  const bool reuse = same_layout(snapshot_.tensors, state.tensors);
  if (!reuse) snapshot_.tensors.clear();
  for (size_t i = 0; i < state.tensors.size(); ++i) {
    const auto& [name, source] = state.tensors[i];
    if (!reuse) snapshot_.tensors.emplace_back(name, Tensor::empty(source.shape(), source.dtype(), Device::cpu));
    Tensor& copy = snapshot_.tensors[i].second;
    if (source.device() == Device::cpu) {
      parallel_copy(copy.raw(), source.raw(), source.nbytes());
    } else {
      copy.copy_from(source);
    }
  }
  snapshot_.step = state.step;
  snapshot_.tokens = state.tokens;
  snapshot_.config = state.config;
  snapshot_.data_position = state.data_position;
  snapshot_.trainer_state = state.trainer_state;
  snapshot_.rng_states = state.rng_states;
  snapshot_.layout = state.layout;
}

void AsyncCheckpointWriter::write(CheckpointWriteStats stats) {
  const auto start = std::chrono::steady_clock::now();
  std::optional<std::string> error;
  try {
    save_checkpoint(root_, snapshot_, keep_last_);
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "unknown exception";
  }
  stats.write_ms = milliseconds_since(start);
  if (error) LOG(ERROR) << "checkpoint: writing step " << stats.step << " failed: " << *error;
  {
    std::lock_guard lock(mutex_);
    last_error_ = std::move(error);
    last_stats_ = stats;
  }
  busy_ = false;
}

}  // namespace linea

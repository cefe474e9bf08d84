#include "checkpoint/async_checkpoint_writer.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "parallel/communicator.h"
#include "parallel/error_agreement.h"

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

bool same_layout(const std::vector<CheckpointTensor>& a, const std::vector<CheckpointTensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].data.shape() != b[i].data.shape() || a[i].data.dtype() != b[i].data.dtype()) {
      return false;
    }
  }
  return true;
}

}  // namespace

AsyncCheckpointWriter::AsyncCheckpointWriter(std::filesystem::path root, int keep_last, Communicator* group)
    : root_(std::move(root)), keep_last_(keep_last), group_(group) {
  if (keep_last < 1) throw std::invalid_argument("AsyncCheckpointWriter: keep_last must be >= 1");
}

AsyncCheckpointWriter::~AsyncCheckpointWriter() { join(); }

bool AsyncCheckpointWriter::several() const { return group_ != nullptr && group_->size() > 1; }

void AsyncCheckpointWriter::join() {
  if (thread_.joinable()) thread_.join();
}

void AsyncCheckpointWriter::wait() {
  join();
  if (pending_) finish();
}

bool AsyncCheckpointWriter::poll() {
  if (!several()) return !busy_;
  if (!pending_) return true;
  Tensor done = Tensor::empty({1}, DType::i64);
  done.data<int64_t>()[0] = busy_ ? 0 : 1;
  group_->all_reduce(done, ReduceOp::sum);
  if (done.data<int64_t>()[0] < group_->size()) return false;
  join();
  finish();
  return true;
}

void AsyncCheckpointWriter::record_error(int64_t step, std::string error) {
  std::lock_guard lock(mutex_);
  last_error_ = error;
  outcomes_.push_back({step, std::move(error)});
}

std::vector<CheckpointOutcome> AsyncCheckpointWriter::take_outcomes() {
  std::lock_guard lock(mutex_);
  return std::exchange(outcomes_, {});
}

void AsyncCheckpointWriter::finish() {
  pending_ = false;
  const auto start = std::chrono::steady_clock::now();
  std::string local_error;
  {
    std::lock_guard lock(mutex_);
    if (last_error_) local_error = *last_error_;
  }
  std::string errors = agree_on_errors(*group_, local_error);
  if (errors.empty()) {
    std::string commit_error;
    if (group_->rank() == 0) {
      try {
        commit_checkpoint_save(temporary_, snapshot_, group_->size(), keep_last_);
      } catch (const std::exception& e) {
        commit_error = e.what();
      }
    }
    errors = agree_on_errors(*group_, commit_error);
  }
  std::lock_guard lock(mutex_);
  last_stats_.write_ms += milliseconds_since(start);
  if (errors.empty()) {
    last_error_.reset();
  } else {
    last_error_ = "writing step " + std::to_string(snapshot_.step) + " failed: " + errors;
  }
  outcomes_.push_back({snapshot_.step, last_error_});
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
  if (several()) {  // rank 0 prepares the directory every rank writes into
    std::string error;
    if (group_->rank() == 0) {
      try {
        begin_checkpoint_save(root_, state.step);
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    if (const std::string errors = agree_on_errors(*group_, error); !errors.empty()) {
      record_error(state.step, "preparing step " + std::to_string(state.step) + " failed: " + errors);
      return;
    }
    temporary_ = temporary_checkpoint_directory(root_, state.step);
    pending_ = true;
  }
  CheckpointWriteStats stats;
  stats.step = state.step;
  stats.waiting_ms = milliseconds_since(start);
  snapshot(state);
  for (const CheckpointTensor& t : snapshot_.tensors) stats.bytes += static_cast<int64_t>(t.data.nbytes());
  stats.blocked_ms = milliseconds_since(start);
  busy_ = true;
  thread_ = std::thread(&AsyncCheckpointWriter::write, this, stats);
}

void AsyncCheckpointWriter::snapshot(const CheckpointState& state) {
  const bool reuse = same_layout(snapshot_.tensors, state.tensors);
  if (!reuse) snapshot_.tensors.clear();
  for (size_t i = 0; i < state.tensors.size(); ++i) {
    const CheckpointTensor& t = state.tensors[i];
    const Tensor& source = t.data;
    if (!reuse) snapshot_.tensors.emplace_back(t.name, Tensor::empty(source.shape(), source.dtype(), Device::cpu));
    snapshot_.tensors[i].full_shape = t.full_shape;
    snapshot_.tensors[i].offset = t.offset;
    Tensor& copy = snapshot_.tensors[i].data;
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
    if (several()) {
      write_checkpoint_part(temporary_, snapshot_, group_->rank());
    } else {
      save_checkpoint(root_, snapshot_, keep_last_);
    }
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "unknown exception";
  }
  stats.write_ms = milliseconds_since(start);
  {
    std::lock_guard lock(mutex_);
    if (!several()) outcomes_.push_back({stats.step, error});  // several ranks: finish() agrees first
    last_error_ = std::move(error);
    last_stats_ = stats;
  }
  busy_ = false;
}

}  // namespace linea

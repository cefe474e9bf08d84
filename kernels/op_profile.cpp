#include "kernels/op_profile.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <mutex>
#include <utility>

#ifdef LINEA_WITH_CUDA
#include "kernels/cuda/runtime.h"
#endif

namespace linea::ops {

namespace {

constexpr size_t kMaxPending = 4096;  // CUDA spans read back at once

std::atomic<bool> profile_on{false};
std::atomic<bool> cuda_seen{false};  // an op has run on CUDA: spans record start events from now on
thread_local int depth = 0;          // open spans of this thread

using Key = std::pair<std::string, std::string>;  // op, signature

struct PendingSpan {
  Key key;
  void* start;
  void* end;
};

// The profile's state, behind one mutex: totals per key, CUDA spans not yet read back, and spare
// events for the next spans.
struct Profile {
  std::mutex mutex;
  std::map<Key, OpProfileEntry> entries;
  std::vector<PendingSpan> pending;
  std::vector<void*> spare_events;

  void add(const Key& key, double ms) {
    OpProfileEntry& e = entries[key];
    if (e.calls == 0) e.op = key.first, e.signature = key.second;
    ++e.calls;
    e.total_ms += ms;
  }

#ifdef LINEA_WITH_CUDA
  void* take_event() {
    if (spare_events.empty()) return cuda::event_create();
    void* event = spare_events.back();
    spare_events.pop_back();
    return event;
  }
#endif

  // Reads every pending span's time (waiting for its end event) into the totals.
  void read_pending() {
#ifdef LINEA_WITH_CUDA
    for (const PendingSpan& span : pending) {
      add(span.key, double(cuda::event_elapsed_ms(span.start, span.end)));
      spare_events.push_back(span.start);
      spare_events.push_back(span.end);
    }
#endif
    pending.clear();
  }
};

Profile& profile() {
  static Profile* p = new Profile;  // never destroyed: spans may end during static destruction
  return *p;
}

}  // namespace

void op_profile_start() {
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.read_pending();
  p.entries.clear();
  profile_on = true;
}

void op_profile_stop() { profile_on = false; }

bool op_profile_on() { return profile_on.load(std::memory_order_relaxed); }

std::vector<OpProfileEntry> op_profile_entries() {
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.read_pending();
  std::vector<OpProfileEntry> out;
  for (const auto& [key, entry] : p.entries) out.push_back(entry);
  std::stable_sort(out.begin(), out.end(),
                   [](const OpProfileEntry& a, const OpProfileEntry& b) { return a.total_ms > b.total_ms; });
  return out;
}

OpSpan::OpSpan() {
  if (!op_profile_on()) return;
  open_ = true;
  timed_ = depth++ == 0;
  if (!timed_) return;
  exceptions_ = std::uncaught_exceptions();
#ifdef LINEA_WITH_CUDA
  if (cuda_seen.load(std::memory_order_relaxed)) {
    Profile& p = profile();
    std::lock_guard<std::mutex> lock(p.mutex);
    start_event_ = p.take_event();
    cuda::event_record(start_event_);
  }
#endif
  host_start_ = std::chrono::steady_clock::now();
}

OpSpan::OpSpan(OpSpan&& other) noexcept
    : open_(std::exchange(other.open_, false)),
      timed_(std::exchange(other.timed_, false)),
      exceptions_(other.exceptions_),
      host_start_(other.host_start_),
      start_event_(std::exchange(other.start_event_, nullptr)) {}

void OpSpan::end(const std::string& op, const std::string& signature, bool on_cuda) {
  if (!timed_) return;
  timed_ = false;
  if (std::uncaught_exceptions() > exceptions_ || !op_profile_on()) return;  // the destructor frees the event
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (!on_cuda) {
    const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - host_start_;
    p.add({op, signature}, ms.count());
    return;
  }
#ifdef LINEA_WITH_CUDA
  cuda_seen = true;
  if (!start_event_) return;  // the process's first CUDA op
  void* end_event = p.take_event();
  cuda::event_record(end_event);
  p.pending.push_back({{op, signature}, start_event_, end_event});
  start_event_ = nullptr;
  if (p.pending.size() >= kMaxPending) p.read_pending();
#endif
}

OpSpan::~OpSpan() {
  if (open_) --depth;
  if (start_event_) {
    Profile& p = profile();
    std::lock_guard<std::mutex> lock(p.mutex);
    p.spare_events.push_back(start_event_);
  }
}

}  // namespace linea::ops

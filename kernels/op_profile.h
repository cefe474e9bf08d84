// Op profile: where a step's time goes, op by op, where no timeline profiler runs (the GPU machine
// has no Nsight Systems). `bench_train --op-profile FILE` writes one for the timed steps.
//
// While it is on, every call of an op that checks its arguments with an OpArguments (ops.h and the
// mixer families' ops) is timed from the start of its checks to its return: on CUDA between two
// events on the default stream, where every op runs, so a span is the GPU's time on the op's
// kernels plus any time the GPU waited inside the span for the host to launch them; on the CPU by
// the wall clock. Only the outermost op of a thread counts (an op that calls ops is timed whole),
// an op that throws is not counted, and on CUDA a process's first op is not timed (its start event
// is recorded only once an op has run there). Times add up per op name and signature: the call's
// element type and the shapes of its first two tensor arguments, e.g. "bf16 x[16384, 1024]
// weight[3072, 1024]". Pending CUDA spans are read back every 4096 spans (waiting for the device:
// profiled steps run a little slower than others) and by op_profile_entries(). Off, it costs an
// OpArguments one test of an atomic flag.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace linea::ops {

struct OpProfileEntry {
  std::string op;
  std::string signature;
  int64_t calls = 0;
  double total_ms = 0;
};

// Turns the profile on, forgetting what it timed before.
void op_profile_start();
// Turns it off; what it timed stays readable.
void op_profile_stop();
bool op_profile_on();
// Everything timed since the last start, the largest total first (waits for pending CUDA spans).
std::vector<OpProfileEntry> op_profile_entries();

// One op call's span (a member of OpArguments). It begins at construction when the profile is on
// and no other span of the thread is open; end() times it under the op's name and signature, unless
// an exception is in flight. Movable (the moved-from span ends nothing), not copyable.
class OpSpan {
 public:
  OpSpan();
  ~OpSpan();
  OpSpan(OpSpan&& other) noexcept;
  OpSpan(const OpSpan&) = delete;
  OpSpan& operator=(const OpSpan&) = delete;

  // True when this span is being timed (the signature is worth building).
  bool timed() const { return timed_; }
  void end(const std::string& op, const std::string& signature, bool on_cuda);

 private:
  bool open_ = false;   // counted in the thread's depth
  bool timed_ = false;  // the outermost span, profile on
  int exceptions_ = 0;
  std::chrono::steady_clock::time_point host_start_;
  void* start_event_ = nullptr;
};

}  // namespace linea::ops

// ProgressMeter: one status line on stderr for long data jobs, e.g.
//   prepare: 120,431 docs  31.2M tokens  118.4 MB text  14.8 MB/s  8.0 s
// redrawn in place (at most 5 times a second) on a terminal, printed every 10 s otherwise.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace linea::data {

class ProgressMeter {
 public:
  ProgressMeter(std::string label, bool enabled);
  void update(int64_t docs, int64_t tokens, int64_t text_bytes);
  // Prints the final line (with a newline) and returns the elapsed seconds.
  double finish(int64_t docs, int64_t tokens, int64_t text_bytes);
  double elapsed_seconds() const;

 private:
  void print(int64_t docs, int64_t tokens, int64_t text_bytes, bool final);
  std::string label_;
  bool enabled_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_, last_print_;
};

}  // namespace linea::data

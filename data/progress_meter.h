// ProgressMeter: one status line on stderr for long data jobs, e.g.
//   prepare: [#########...........]  45%  120,431 docs  31.20M tokens  118.4 MB text  14.8 MB/s
//            3.91M tokens/s  8.0 s  ETA 9.8 s
// redrawn in place (at most 5 times a second) on a terminal, printed every 10 s otherwise. The bar
// and the ETA (elapsed × (1 − f) / f) appear when the share f of the input read is known.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace linea::data {

class ProgressMeter {
 public:
  ProgressMeter(std::string label, bool enabled);
  // `fraction`: the share of the input read, in [0, 1]; negative when unknown.
  void update(int64_t docs, int64_t tokens, int64_t text_bytes, double fraction = -1);
  // Prints the final line (with a newline) and returns the elapsed seconds.
  double finish(int64_t docs, int64_t tokens, int64_t text_bytes);
  double elapsed_seconds() const;

 private:
  void print(int64_t docs, int64_t tokens, int64_t text_bytes, double fraction, bool final);
  std::string label_;
  bool enabled_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_, last_print_;
};

// "12.3 s", "4m05s", "2h07m".
std::string format_duration(double seconds);

}  // namespace linea::data

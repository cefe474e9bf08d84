// What the CPU benchmarks share (bench/cuda/gpu_bench.h is the GPU benchmarks' own): timing (a
// steady clock, best and median of repeated runs), the parse of their numeric arguments (errors are
// std::invalid_argument naming the argument), one JSON line per result, and a main() that reports
// an exception as "PROGRAM: error: ..." with exit status 1.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace linea::bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Best wall time in milliseconds over `repeats` runs of fn (after one warm-up run).
inline double best_ms(int repeats, const std::function<void()>& fn) {
  fn();
  double best = INFINITY;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    fn();
    best = std::min(best, ms_since(start));
  }
  return best;
}

// Median wall time in seconds over `repeats` runs of fn (no warm-up).
inline double median_s(int repeats, const std::function<void()>& fn) {
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    fn();
    t.push_back(ms_since(start) / 1e3);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// `value` as a positive integer; `what` names the argument in the error.
inline int64_t parse_count(const std::string& what, const std::string& value) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (value.empty() || used != value.size() || v < 1)
    throw std::invalid_argument(what + ": expected a positive integer, got '" + value + "'");
  return v;
}

// argv[index] as a positive integer, or `fallback` when there are fewer arguments.
inline int64_t positional_count(int argc, char** argv, int index, int64_t fallback) {
  return argc <= index ? fallback : parse_count("argument " + std::to_string(index), argv[index]);
}

inline void print_json_line(const nlohmann::json& line) {
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
}

// Runs run(argc, argv) and returns its status; an exception is printed as "PROGRAM: error: what" and
// gives status 1.
inline int main_reporting_errors(const char* program, int (*run)(int, char**), int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace linea::bench

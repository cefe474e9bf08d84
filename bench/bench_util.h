// What the CPU benchmarks share (bench/cuda/gpu_bench.h is the GPU benchmarks' own): timing (a
// steady clock, best and median of repeated runs, the process's CPU time), the parse of their
// numeric arguments and of the model benchmarks' command line (errors are std::invalid_argument
// naming the argument), random tokens with next-token targets, one JSON line per result, and a
// main() that reports an exception as "PROGRAM: error: ..." with exit status 1.
#pragma once
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/random.h"
#include "kernels/tensor.h"

namespace linea::bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// CPU time of the whole process (all its threads) in milliseconds: steadier than wall time on a
// shared machine.
inline double process_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) / 1e6;
}

// The best wall time and the best process CPU time, in milliseconds, over `repeats` runs of fn
// (after one warm-up run); prepare, when given, runs untimed before each run.
struct Best {
  double wall_ms = INFINITY, cpu_ms = INFINITY;
};
inline Best best_of(int64_t repeats, const std::function<void()>& fn, const std::function<void()>& prepare = {}) {
  Best best;
  for (int64_t r = 0; r <= repeats; ++r) {
    if (prepare) prepare();
    const double cpu = process_cpu_ms();
    const auto start = Clock::now();
    fn();
    if (r == 0) continue;
    best.wall_ms = std::min(best.wall_ms, ms_since(start));
    best.cpu_ms = std::min(best.cpu_ms, process_cpu_ms() - cpu);
  }
  return best;
}

// Best wall time in milliseconds over `repeats` runs of fn (after one warm-up run).
inline double best_ms(int repeats, const std::function<void()>& fn) { return best_of(repeats, fn).wall_ms; }

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

// The model benchmarks' command line: CONFIG.toml [--batch B] [--seq-len T] [--steps S] [--FLAG
// VALUE for each of `flags`, handed to its function] [section.key=value ...].
struct ModelBenchArgs {
  std::string config;
  int64_t batch = 0, seq_len = 0, steps = 0;
  std::vector<std::string> overrides;
};

// The defaults are `batch`, `seq_len` and `steps`.
inline ModelBenchArgs parse_model_bench_args(
    int argc, char** argv, int64_t batch, int64_t seq_len, int64_t steps,
    const std::map<std::string, std::function<void(const std::string&)>>& flags = {}) {
  ModelBenchArgs a;
  a.batch = batch;
  a.seq_len = seq_len;
  a.steps = steps;
  if (argc < 2) throw std::invalid_argument("expected CONFIG.toml");
  a.config = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string word = argv[i];
    const bool has_value = i + 1 < argc;
    if (word == "--batch" && has_value) {
      a.batch = parse_count(word, argv[++i]);
    } else if (word == "--seq-len" && has_value) {
      a.seq_len = parse_count(word, argv[++i]);
    } else if (word == "--steps" && has_value) {
      a.steps = parse_count(word, argv[++i]);
    } else if (const auto flag = flags.find(word.substr(std::min<size_t>(2, word.size())));
               word.rfind("--", 0) == 0 && flag != flags.end() && has_value) {
      flag->second(argv[++i]);
    } else if (word.find('=') != std::string::npos) {
      a.overrides.push_back(word);
    } else {
      throw std::invalid_argument("unexpected argument '" + word + "'");
    }
  }
  return a;
}

// n token ids uniform in [0, vocab) and their next-token targets (−1 after the last).
struct TokenBatch {
  Tensor ids, targets;
};
inline TokenBatch random_token_batch(int64_t n, int64_t vocab, uint64_t seed) {
  TokenBatch b{Tensor::empty({n}, DType::i32), Tensor::empty({n}, DType::i32)};
  Rng rng(seed);
  int32_t* ids = b.ids.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(vocab));
  for (int64_t i = 0; i < n; ++i) b.targets.data<int32_t>()[i] = i + 1 < n ? ids[i + 1] : -1;
  return b;
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

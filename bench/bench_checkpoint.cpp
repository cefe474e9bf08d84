// bench_checkpoint: how long an asynchronous checkpoint blocks training, against how long the
// write takes, for a state of a given size (f32 parameters + two Adam moments, random values).
// Usage: bench_checkpoint [MEGABYTES=64] [DIRECTORY=<temporary>]
// Prints one JSON line. The reference measured in the same run is a plain write() + fsync() of
// the same bytes to the same directory (raw_write_ms); write_over_raw is the format's overhead.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "bench/bench_util.h"
#include "checkpoint/async_checkpoint_writer.h"
#include "kernels/random.h"

namespace {

namespace fs = std::filesystem;
using linea::bench::Clock;
using linea::bench::ms_since;

// write() + fsync() of the tensors' bytes into one file: the disk's own speed.
double raw_write_ms(const fs::path& path, const linea::CheckpointState& state) {
  const auto start = Clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create " + path.string());
  for (const linea::CheckpointTensor& t : state.tensors) {
    const linea::Tensor& tensor = t.data;
    const char* p = static_cast<const char*>(tensor.raw());
    for (size_t done = 0; done < tensor.nbytes();) {
      const ssize_t n = ::write(fd, p + done, tensor.nbytes() - done);
      if (n <= 0) throw std::runtime_error("cannot write " + path.string());
      done += static_cast<size_t>(n);
    }
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) throw std::runtime_error("cannot fsync " + path.string());
  const double ms = ms_since(start);
  fs::remove(path);
  return ms;
}

int run(int argc, char** argv) {
  const double megabytes = argc > 1 ? std::stod(argv[1]) : 64.0;
  if (!(megabytes > 0)) throw std::invalid_argument("MEGABYTES must be > 0, got " + std::string(argv[1]));
  const bool own_directory = argc <= 2;
  const fs::path root = own_directory
                            ? fs::temp_directory_path() / ("linea-bench-checkpoint-" + std::to_string(getpid()))
                            : fs::path(argv[2]);

  // Parameters and the two Adam moments, one third of the bytes each.
  const int64_t floats_per_tensor = static_cast<int64_t>(megabytes * 1e6 / 4 / 3);
  linea::CheckpointState state;
  state.config = "bench";
  linea::Rng rng(1);
  for (const char* name : {"params", "adam/m", "adam/v"}) {
    linea::Tensor t = linea::Tensor::empty({floats_per_tensor}, linea::DType::f32);
    linea::fill_uniform(t, rng, -1.0, 1.0);
    state.tensors.emplace_back(name, t);
  }

  linea::AsyncCheckpointWriter writer(root, 1);
  state.step = 1;
  writer.save(state);  // fresh snapshot buffers
  writer.wait();
  const linea::CheckpointWriteStats first = writer.last_stats();
  state.step = 2;
  writer.save(state);  // buffers reused, as at every later checkpoint of a run
  writer.wait();
  const linea::CheckpointWriteStats steady = writer.last_stats();
  if (writer.last_error()) throw std::runtime_error(*writer.last_error());

  const auto load_start = Clock::now();
  const std::optional<linea::CheckpointState> loaded = linea::load_latest_checkpoint(root, {.strict = true});
  const double load_ms = ms_since(load_start);
  const double raw_ms = raw_write_ms(root / "raw-reference.bin", state);
  if (own_directory) fs::remove_all(root);

  const double mb = static_cast<double>(steady.bytes) / 1e6;
  nlohmann::json line = {{"bench", "checkpoint"},
                         {"bytes", steady.bytes},
                         {"blocked_ms_first", first.blocked_ms},
                         {"blocked_ms", steady.blocked_ms},
                         {"write_ms", steady.write_ms},
                         {"write_MB_per_s", mb / (steady.write_ms / 1e3)},
                         {"blocked_over_write", steady.blocked_ms / steady.write_ms},
                         {"raw_write_ms", raw_ms},
                         {"write_over_raw", steady.write_ms / raw_ms},
                         {"load_verify_ms", load_ms},
                         {"load_MB_per_s", mb / (load_ms / 1e3)}};
  linea::bench::print_json_line(line);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return linea::bench::main_reporting_errors("bench_checkpoint", run, argc, argv); }

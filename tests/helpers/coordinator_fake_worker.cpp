// coordinator_fake_worker: a stand-in for `linea train` in the coordinator's tests, launched by the
// coordinator as `coordinator_fake_worker CONFIG key=value...`. It behaves like the trainer where the
// coordinator can see it: resumes from its last committed checkpoint, appends one metrics.jsonl line
// per step and, at the end, a {"finished": true} line (also when a relaunch finds nothing left to
// do, as a trainer asked to continue a finished run would), reports through
// HeartbeatClient::from_env(), and can be told to fail:
//   run.dir, run.name        it works in RUN_DIR/RUN_NAME (as the trainer does)
//   fake.steps               steps in all (default 20)
//   fake.step_ms             time per step (default 20)
//   fake.checkpoint_every    commit a checkpoint every k steps (default 5)
//   fake.crash_at            SIGKILL itself after this step (default: never)
//   fake.hang_at             SIGSTOP itself after this step (default: never)
//   fake.fault_attempts      how many attempts (from 0) fail; later ones run clean (default 1)
// The loss is a fixed function of the step, so a resumed run logs the same numbers. A test counts
// the "finished" lines to see how many times a run was trained to completion.
#include <toml++/toml.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "coordinator/client.h"
#include "coordinator/journal.h"

namespace {

using linea::coordinator::HeartbeatClient;

std::map<std::string, std::string> parse_overrides(int argc, char** argv) {
  std::map<std::string, std::string> values;
  for (int i = 2; i < argc; ++i) {
    const std::string word = argv[i];
    const size_t eq = word.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("expected key=value, got " + word);
    std::string value = word.substr(eq + 1);
    try {  // a TOML literal ("..." or '...' strings, numbers); anything else is a bare string
      const toml::table t = toml::parse("v = " + value);
      if (const auto* s = t.get("v")->as_string()) value = s->get();
    } catch (const toml::parse_error&) {
    }
    values[word.substr(0, eq)] = value;
  }
  return values;
}

int64_t integer(const std::map<std::string, std::string>& values, const std::string& key, int64_t fallback) {
  auto it = values.find(key);
  return it == values.end() ? fallback : std::stoll(it->second);
}

double loss_at(int64_t step) { return 2.0 + 8.0 * std::exp(-static_cast<double>(step) / 20.0); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: coordinator_fake_worker CONFIG key=value...\n");
    return 2;
  }
  if (!std::filesystem::is_regular_file(argv[1])) {
    std::fprintf(stderr, "coordinator_fake_worker: no config file %s\n", argv[1]);
    return 2;
  }
  const auto values = parse_overrides(argc, argv);
  const std::string run_dir = values.at("run.dir") + "/" + values.at("run.name");
  const int64_t steps = integer(values, "fake.steps", 20);
  const int64_t step_ms = integer(values, "fake.step_ms", 20);
  const int64_t checkpoint_every = integer(values, "fake.checkpoint_every", 5);
  const int64_t crash_at = integer(values, "fake.crash_at", -1);
  const int64_t hang_at = integer(values, "fake.hang_at", -1);
  const int64_t fault_attempts = integer(values, "fake.fault_attempts", 1);
  const char* attempt_text = std::getenv("LINEA_ATTEMPT");
  const int64_t attempt = attempt_text ? std::atoll(attempt_text) : 0;
  const bool faulty = attempt < fault_attempts;
  std::filesystem::create_directories(run_dir);

  int64_t checkpoint = -1;  // the last committed step
  if (std::ifstream in(run_dir + "/checkpoint"); in) in >> checkpoint;
  auto coordinator = HeartbeatClient::from_env();
  std::ofstream metrics(run_dir + "/metrics.jsonl", std::ios::app);
  for (int64_t step = checkpoint + 1; step < steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double tokens_per_s = 1000.0 / seconds;
    metrics << "{\"step\": " << step << ", \"loss\": " << loss_at(step) << ", \"tokens_per_s\": " << tokens_per_s
            << ", \"step_time_s\": " << seconds;
    if (step % 5 == 4) metrics << ", \"val_loss\": " << loss_at(step) + 0.1;
    metrics << "}" << std::endl;
    // The step is logged before its checkpoint commits, so a kill in between loses no metrics line.
    if (checkpoint_every > 0 && (step + 1) % checkpoint_every == 0) {
      linea::coordinator::write_file_atomically(run_dir + "/checkpoint", std::to_string(step) + "\n");
      checkpoint = step;
    }
    if (coordinator) coordinator->heartbeat({step, loss_at(step), tokens_per_s, std::nullopt, checkpoint});
    if (faulty && step == crash_at) std::raise(SIGKILL);
    if (faulty && step == hang_at) std::raise(SIGSTOP);
  }
  metrics << "{\"finished\": true, \"attempt\": " << attempt << "}" << std::endl;
  return 0;
}

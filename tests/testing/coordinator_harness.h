// Helpers for the coordinator's tests: a temporary directory, a token file, a Coordinator serving on
// a loopback port in a background thread, a raw socket for malformed traffic, polling with a
// deadline (wait_for_end: until a run has ended), and the path of the fake worker
// (tests/helpers/coordinator_fake_worker.cpp).
#pragma once
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "coordinator/client.h"
#include "coordinator/coordinator.h"
#include "coordinator/token_file.h"

namespace linea::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "linea-coordinator-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline std::string fake_worker_path() { return std::string(LINEA_TEST_HELPERS_DIR) + "/coordinator_fake_worker"; }

// Options for a test coordinator: any free port, fast ticks and timeouts, the fake worker.
inline coordinator::CoordinatorOptions test_options(const TempDir& dir) {
  coordinator::CoordinatorOptions o;
  o.port = 0;
  o.state_dir = dir / "state";
  o.token_file = dir / "token";
  if (!std::filesystem::exists(o.token_file)) coordinator::create_token_file(o.token_file);
  o.tick_s = 0.01;
  o.heartbeat_timeout_s = 0.5;
  o.startup_timeout_s = 5;
  o.backoff_base_s = 0.05;
  o.backoff_max_s = 0.2;
  o.kill_grace_s = 0.2;
  o.max_restarts = 3;
  o.slots = 4;
  o.launch = coordinator::LaunchTemplate::uniform(fake_worker_path() + " {config} {overrides}");
  return o;
}

// A Coordinator serving in a background thread; stopped (as by a shutdown request) on destruction.
class CoordinatorThread {
 public:
  explicit CoordinatorThread(const coordinator::CoordinatorOptions& options)
      : server_(std::make_unique<coordinator::Coordinator>(options)),
        endpoint_{"127.0.0.1", server_->port()},
        token_(coordinator::read_token_file(options.token_file)),
        thread_([this] {
          try {
            server_->run();
          } catch (const std::exception& e) {
            ADD_FAILURE() << "coordinator failed: " << e.what();
          }
        }) {}
  ~CoordinatorThread() { stop(); }

  void stop() {
    if (!thread_.joinable()) return;
    server_->stop();
    thread_.join();
  }
  const coordinator::Endpoint& endpoint() const { return endpoint_; }
  nlohmann::json request(nlohmann::json message) const {
    return coordinator::send_request(endpoint_, token_, std::move(message), std::chrono::seconds(5));
  }
  nlohmann::json run_status(const std::string& name) const {
    const nlohmann::json reply = request({{"type", "status"}});
    for (const auto& r : reply["runs"])
      if (r["spec"]["name"] == name) return r;
    return nullptr;
  }

 private:
  std::unique_ptr<coordinator::Coordinator> server_;
  coordinator::Endpoint endpoint_;
  std::string token_;
  std::thread thread_;
};

// Polls `done` every 10 ms until it holds or `timeout` passes; returns whether it held.
inline bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// Whether a run's status (null while the run is not listed) says it ended: completed, failed or
// cancelled.
inline bool ended(const nlohmann::json& status) {
  const std::string state = status.is_null() ? "" : status.value("state", "");
  return state == "completed" || state == "failed" || state == "cancelled";
}

// Polls run `run`'s status until it ended or `limit` passes (a test failure then); returns the last
// status read.
inline nlohmann::json wait_for_end(const CoordinatorThread& server, const std::string& run,
                                   std::chrono::milliseconds limit) {
  nlohmann::json status;
  EXPECT_TRUE(wait_until(
      [&] {
        status = server.run_status(run);
        return ended(status);
      },
      limit))
      << "run " << run << " did not end: " << status.dump();
  return status;
}

// A run of the fake worker: writes into DIR/runs/NAME; `settings` are extra "fake.*" overrides.
inline nlohmann::json fake_run(const TempDir& dir, const std::string& name, const std::vector<std::string>& settings) {
  const std::string config = dir / "fake.toml";
  if (!std::filesystem::exists(config)) write_text(config, "# the fake worker reads its overrides only\n");
  std::vector<std::string> overrides = settings;
  overrides.push_back("run.dir=\"" + (dir / "runs") + "\"");
  overrides.push_back("run.name=\"" + name + "\"");
  return {{"name", name}, {"config", config}, {"overrides", overrides}, {"run_dir", dir / ("runs/" + name)}};
}

// How many times the fake worker trained a run to completion: its "finished" lines in metrics.jsonl.
inline int completions(const TempDir& dir, const std::string& name) {
  std::ifstream in(dir / ("runs/" + name + "/metrics.jsonl"));
  int finished = 0;
  for (std::string line; std::getline(in, line);) finished += line.find("\"finished\": true") != std::string::npos;
  return finished;
}

// A raw TCP connection for sending arbitrary bytes.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) : socket_(io_) {
    socket_.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  }
  void send(const std::string& bytes) { boost::asio::write(socket_, boost::asio::buffer(bytes)); }
  void finish_sending() { socket_.shutdown(boost::asio::ip::tcp::socket::shutdown_send); }
  // The next reply line, or "" when the server closed the connection first (or nothing came within 5 s).
  std::string read_line() {
    boost::system::error_code result = boost::asio::error::timed_out;
    size_t n = 0;
    boost::asio::async_read_until(socket_, buffer_, '\n', [&](const boost::system::error_code& ec, size_t bytes) {
      result = ec;
      n = bytes;
    });
    run_for_a_while();
    if (result) return "";
    std::string line(boost::asio::buffers_begin(buffer_.data()),
                     boost::asio::buffers_begin(buffer_.data()) + static_cast<std::ptrdiff_t>(n - 1));
    buffer_.consume(n);
    return line;
  }
  // True when the server closes the connection (a read ends with EOF or a reset) within 5 s.
  bool closed_by_server() {
    boost::system::error_code result = boost::asio::error::timed_out;
    char byte;
    socket_.async_read_some(boost::asio::buffer(&byte, 1),
                            [&](const boost::system::error_code& ec, size_t) { result = ec; });
    run_for_a_while();
    return result == boost::asio::error::eof || result == boost::asio::error::connection_reset;
  }

 private:
  void run_for_a_while() {
    io_.restart();
    io_.run_for(std::chrono::seconds(5));
    if (!io_.stopped()) {  // timed out: abandon the pending read
      socket_.cancel();
      io_.run();
    }
  }

  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::streambuf buffer_;
};

}  // namespace linea::testing

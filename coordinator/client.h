// Talking to a coordinator.
//
// send_request(): one request/reply exchange on a fresh connection, all of it (resolve, connect,
// write, read) within `timeout`. Throws std::runtime_error when the coordinator cannot be reached
// or replies with an error ("coordinator 127.0.0.1:47431: unauthorized: ...").
//
// CoordinatorConnection: the same exchanges on one connection kept open between them (connected
// on first use; after any failure the next request connects afresh).
//
// HeartbeatClient: what a training process (rank 0) uses. It never blocks the caller on the network
// and never throws: heartbeat() hands the latest progress to a background thread, which sends it
// (a newer heartbeat replaces one not yet sent, so a slow coordinator never builds a backlog) on
// one kept connection: once the coordinator has accepted its registration, the connection is never
// closed to make room for others (line_server.h), so idle or hostile connections cannot crowd the
// heartbeats out. A request that fails on the kept connection (the coordinator closed it while
// idle, or restarted) is tried once more on a fresh one.
// Failures are logged (the first, then at most once a minute) and training goes on. Only
// heartbeat() calls lead to messages, so a hung training loop falls silent and is detected.
//
//   auto coordinator = linea::coordinator::HeartbeatClient::from_env(world_size);  // nullptr: none
//   ...each logged step:
//   if (coordinator) coordinator->heartbeat({.step = step, .loss = loss, .tokens_per_s = tps,
//                                            .val_loss = val, .checkpoint_step = last_committed});
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "coordinator/asio.h"
#include "coordinator/protocol.h"

namespace linea::coordinator {

constexpr std::chrono::milliseconds kDefaultRequestTimeout{10000};
constexpr size_t kMaxReplyBytes = size_t{256} << 20;

nlohmann::json send_request(const Endpoint& endpoint, const std::string& token, nlohmann::json message,
                            std::chrono::milliseconds timeout = kDefaultRequestTimeout);

class CoordinatorConnection {
 public:
  CoordinatorConnection(Endpoint endpoint, std::string token);
  CoordinatorConnection(const CoordinatorConnection&) = delete;
  CoordinatorConnection& operator=(const CoordinatorConnection&) = delete;

  // One exchange within `timeout` (connecting first when not connected); throws as send_request.
  nlohmann::json request(nlohmann::json message, std::chrono::milliseconds timeout = kDefaultRequestTimeout);
  bool connected() const { return connected_; }

 private:
  void disconnect();

  Endpoint endpoint_;
  std::string token_;
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::streambuf replies_;
  bool connected_ = false;
};

class HeartbeatClient {
 public:
  // From LINEA_COORDINATOR (host:port), LINEA_COORDINATOR_TOKEN_FILE, LINEA_RUN_ID and LINEA_ATTEMPT
  // (set by the coordinator for the jobs it launches). nullptr when LINEA_COORDINATOR is unset; also
  // nullptr, with an error logged, when the others are missing or invalid. Sends a registration.
  static std::unique_ptr<HeartbeatClient> from_env(int64_t world_size = 1);

  HeartbeatClient(Endpoint endpoint, std::string token, std::string run, int64_t attempt, int64_t world_size,
                  std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));
  HeartbeatClient(const HeartbeatClient&) = delete;
  HeartbeatClient& operator=(const HeartbeatClient&) = delete;
  // Sends what is pending (within the timeout), then stops the thread.
  ~HeartbeatClient();

  void heartbeat(const Heartbeat& progress) noexcept;

  // Messages delivered and failed so far (for tests and logs).
  int64_t sent() const;
  int64_t failed() const;

 private:
  void send_loop();

  std::string run_;
  int64_t attempt_;
  std::chrono::milliseconds timeout_;
  CoordinatorConnection connection_;  // used by the send thread only

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::optional<nlohmann::json> registration_;
  std::optional<Heartbeat> pending_;
  bool stopping_ = false;
  int64_t sent_ = 0;
  int64_t failed_ = 0;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace linea::coordinator

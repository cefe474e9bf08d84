// LineServer: the TCP side of the coordinator on a Boost.Asio io_context (one thread). It accepts
// connections and reads newline-delimited requests; each complete line goes to the handler, whose
// JSON reply is written back as one line. Enforced here, before any parsing:
//   - a line longer than max_message_bytes → reply {ok: false, code: "too_large"}, close;
//   - the peer ends the connection in the middle of a line → reply "truncated", close;
//   - no first request within first_message_timeout, or no next one within read_timeout → close;
//   - a connection is pending until the handler has accepted one of its requests (an "ok": true
//     reply, which needs the token): at most max_pending_per_peer pending connections per peer
//     address and max_pending in all; a new connection over either limit, or over max_connections
//     in all, closes the oldest pending one (of that peer, or of all) to make room, so idle or
//     unauthenticated connections cannot lock out a client that sends its request at once. Accepted
//     connections are never closed for room (a worker's heartbeat connection stays usable); when
//     max_connections are accepted ones, a new connection is closed at once.
// A reply with "ok": false closes the connection after it is written; otherwise the next line is
// read. Nothing a peer sends can stop the server.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "coordinator/asio.h"

namespace linea::coordinator {

struct LineServerLimits {
  size_t max_message_bytes = 1 << 20;
  std::chrono::milliseconds first_message_timeout{2000};
  std::chrono::milliseconds read_timeout{30000};
  size_t max_connections = 64;
  size_t max_pending = 32;
  size_t max_pending_per_peer = 8;
};

class LineServer {
 public:
  using Handler = std::function<nlohmann::json(std::string_view line)>;

  // Binds and listens (port 0: any free port); throws std::runtime_error naming the address.
  LineServer(boost::asio::io_context& io, const std::string& host, uint16_t port, LineServerLimits limits,
             Handler handler);
  ~LineServer();

  uint16_t port() const { return port_; }
  // Stops accepting and closes every connection.
  void close();

 private:
  class Session;
  void accept_next();
  // Makes room for a new connection from `peer`; false when every connection is an accepted one.
  bool make_room(const std::string& peer);
  void close_oldest_pending(const std::string* peer);

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  LineServerLimits limits_;
  Handler handler_;
  uint16_t port_ = 0;
  uint64_t next_id_ = 0;
  std::map<uint64_t, std::shared_ptr<Session>> sessions_;  // by id: oldest first
};

}  // namespace linea::coordinator

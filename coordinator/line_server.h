// LineServer: the TCP side of the coordinator on a Boost.Asio io_context (one thread). It accepts
// connections and reads newline-delimited requests; each complete line goes to the handler, whose
// JSON reply is written back as one line. Enforced here, before any parsing:
//   - a line longer than max_message_bytes → reply {ok: false, code: "too_large"}, close;
//   - the peer ends the connection in the middle of a line → reply "truncated", close;
//   - no complete request within read_timeout → close;
//   - more than max_connections open → the new connection is closed at once.
// A reply with "ok": false closes the connection after it is written; otherwise the next line is
// read. Nothing a peer sends can stop the server.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

#include "coordinator/asio.h"

namespace linea::coordinator {

struct LineServerLimits {
  size_t max_message_bytes = 1 << 20;
  std::chrono::milliseconds read_timeout{30000};
  size_t max_connections = 64;
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

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  LineServerLimits limits_;
  Handler handler_;
  uint16_t port_ = 0;
  std::set<std::shared_ptr<Session>> sessions_;
};

}  // namespace linea::coordinator

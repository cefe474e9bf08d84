#include "coordinator/line_server.h"

#include <fcntl.h>
#include <glog/logging.h>

#include "coordinator/protocol.h"

namespace linea::coordinator {

namespace asio = boost::asio;
using asio::ip::tcp;

class LineServer::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(LineServer& server, tcp::socket socket, uint64_t id, std::string peer)
      : server_(server),
        socket_(std::move(socket)),
        buffer_(server.limits_.max_message_bytes),
        timer_(server.io_),
        id_(id),
        peer_(std::move(peer)) {}

  void start() { read_next(); }

  void close() {
    boost::system::error_code ignored;
    timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  // Closes and forgets it (the server's table holds the last reference but one).
  void finish() {
    close();
    server_.sessions_.erase(id_);
  }

  bool pending() const { return !accepted_; }
  const std::string& peer() const { return peer_; }

 private:
  void read_next() {
    auto self = shared_from_this();
    timer_.expires_after(accepted_ ? server_.limits_.read_timeout : server_.limits_.first_message_timeout);
    timer_.async_wait([self](const boost::system::error_code& ec) {
      if (!ec) self->finish();  // timed out waiting for a request
    });
    asio::async_read_until(socket_, buffer_, '\n',
                           [self](const boost::system::error_code& ec, size_t bytes) { self->on_read(ec, bytes); });
  }

  void on_read(const boost::system::error_code& ec, size_t bytes) {
    timer_.cancel();
    if (ec == asio::error::not_found) {
      reply(error_reply(error_code::kTooLarge, "request: expected a line of at most " +
                                                   std::to_string(server_.limits_.max_message_bytes) +
                                                   " bytes ending in a newline"));
    } else if (ec == asio::error::eof && buffer_.size() > 0) {
      reply(error_reply(error_code::kTruncated, "request: the connection ended before the newline ending the request"));
    } else if (ec) {
      finish();
    } else {
      std::string line(asio::buffers_begin(buffer_.data()),
                       asio::buffers_begin(buffer_.data()) + static_cast<std::ptrdiff_t>(bytes - 1));
      buffer_.consume(bytes);
      nlohmann::json answer;
      try {
        answer = server_.handler_(line);
      } catch (const std::exception& e) {  // the handler reports errors itself; this is a last resort
        LOG(ERROR) << "coordinator: request handler failed: " << e.what();
        answer = error_reply(error_code::kRejected, e.what());
      }
      reply(answer);
    }
  }

  void reply(const nlohmann::json& answer) {
    const bool keep_open = answer.value("ok", false);
    if (keep_open) accepted_ = true;
    auto self = shared_from_this();
    auto text = std::make_shared<std::string>(encode_message(answer));
    timer_.expires_after(server_.limits_.read_timeout);
    timer_.async_wait([self](const boost::system::error_code& ec) {
      if (!ec) self->finish();  // the peer does not read its reply
    });
    asio::async_write(socket_, asio::buffer(*text),
                      [self, text, keep_open](const boost::system::error_code& ec, size_t) {
                        self->timer_.cancel();
                        if (ec || !keep_open) return self->finish();
                        self->read_next();
                      });
  }

  LineServer& server_;
  tcp::socket socket_;
  asio::streambuf buffer_;
  asio::steady_timer timer_;
  const uint64_t id_;
  const std::string peer_;
  bool accepted_ = false;  // the handler accepted a request of this connection
};

LineServer::LineServer(asio::io_context& io, const std::string& host, uint16_t port, LineServerLimits limits,
                       Handler handler)
    : io_(io), acceptor_(io), limits_(limits), handler_(std::move(handler)) {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) throw std::runtime_error("coordinator: --host: expected an IP address, got \"" + host + "\"");
  const tcp::endpoint endpoint(address, port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw std::runtime_error("coordinator: cannot listen on " + host + ":" + std::to_string(port) + ": " +
                             ec.message());
  ::fcntl(acceptor_.native_handle(), F_SETFD, FD_CLOEXEC);
  port_ = acceptor_.local_endpoint().port();
  accept_next();
}

LineServer::~LineServer() { close(); }

void LineServer::close() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  for (const auto& [id, s] : std::map<uint64_t, std::shared_ptr<Session>>(sessions_)) s->close();
  sessions_.clear();
}

void LineServer::close_oldest_pending(const std::string* peer) {
  for (const auto& [id, s] : sessions_) {
    if (s->pending() && (!peer || s->peer() == *peer)) {
      std::shared_ptr<Session> keep = s;  // finish() erases it from the table
      keep->finish();
      return;
    }
  }
}

bool LineServer::make_room(const std::string& peer) {
  size_t pending = 0, pending_of_peer = 0;
  for (const auto& [id, s] : sessions_) {
    if (!s->pending()) continue;
    ++pending;
    if (s->peer() == peer) ++pending_of_peer;
  }
  if (pending_of_peer >= limits_.max_pending_per_peer) {
    close_oldest_pending(&peer);
    --pending;
  } else if (pending >= limits_.max_pending) {
    close_oldest_pending(nullptr);
    --pending;
  }
  if (sessions_.size() < limits_.max_connections) return true;
  if (pending == 0) return false;
  close_oldest_pending(nullptr);
  return true;
}

void LineServer::accept_next() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      ::fcntl(socket.native_handle(), F_SETFD, FD_CLOEXEC);
      boost::system::error_code peer_ec;
      const std::string peer = socket.remote_endpoint(peer_ec).address().to_string();
      if (peer_ec || !make_room(peer)) {
        boost::system::error_code ignored;
        socket.close(ignored);
      } else {
        const uint64_t id = next_id_++;
        auto session = std::make_shared<Session>(*this, std::move(socket), id, peer);
        sessions_.emplace(id, session);
        session->start();
      }
    }
    accept_next();
  });
}

}  // namespace linea::coordinator

#include "coordinator/client.h"

#include <glog/logging.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>

#include "coordinator/asio.h"
#include "coordinator/token_file.h"

namespace linea::coordinator {

namespace asio = boost::asio;
using asio::ip::tcp;

CoordinatorConnection::CoordinatorConnection(Endpoint endpoint, std::string token)
    : endpoint_(std::move(endpoint)), token_(std::move(token)), socket_(io_), replies_(kMaxReplyBytes) {}

void CoordinatorConnection::disconnect() {
  boost::system::error_code ignored;
  socket_.close(ignored);
  replies_.consume(replies_.size());
  connected_ = false;
}

nlohmann::json CoordinatorConnection::request(nlohmann::json message, std::chrono::milliseconds timeout) {
  const std::string where = "coordinator " + endpoint_.to_string();
  message["token"] = token_;
  const std::string request = encode_message(message);
  tcp::resolver resolver(io_);
  boost::system::error_code failure;
  std::string stage = "resolving the address";
  bool done = false;
  size_t reply_bytes = 0;
  const auto exchange = [&] {
    stage = "sending the request";
    asio::async_write(socket_, asio::buffer(request), [&](auto ec, size_t) {
      if (ec) return void(failure = ec);
      stage = "reading the reply";
      asio::async_read_until(socket_, replies_, '\n', [&](auto ec, size_t bytes) {
        if (ec) return void(failure = ec);
        reply_bytes = bytes;
        done = true;
      });
    });
  };
  if (connected_) {
    exchange();
  } else {
    resolver.async_resolve(endpoint_.host, std::to_string(endpoint_.port),
                           [&](auto ec, tcp::resolver::results_type hosts) {
                             if (ec) return void(failure = ec);
                             stage = "connecting";
                             asio::async_connect(socket_, hosts, [&](auto ec, const tcp::endpoint&) {
                               if (ec) return void(failure = ec);
                               connected_ = true;
                               exchange();
                             });
                           });
  }
  io_.restart();
  io_.run_for(timeout);
  if (!done) {
    disconnect();  // cancels what is still in flight; its handlers refer to this frame, so let them end
    resolver.cancel();
    io_.restart();
    io_.run();
    if (!failure)
      throw std::runtime_error(where + ": timed out " + stage + " after " + std::to_string(timeout.count()) + " ms");
    throw std::runtime_error(where + ": " + stage + ": " + failure.message());
  }
  const std::string line(asio::buffers_begin(replies_.data()),
                         asio::buffers_begin(replies_.data()) + static_cast<std::ptrdiff_t>(reply_bytes));
  replies_.consume(reply_bytes);
  nlohmann::json reply = nlohmann::json::parse(line, nullptr, false);
  if (reply.is_discarded() || !reply.is_object() || !reply.contains("ok")) {
    disconnect();
    throw std::runtime_error(where + ": the reply is not a coordinator reply");
  }
  if (!reply.value("ok", false)) {
    disconnect();  // the coordinator closes the connection after an error
    throw std::runtime_error(where + ": " + reply.value("code", std::string("error")) + ": " +
                             reply.value("error", std::string("(no message)")));
  }
  return reply;
}

nlohmann::json send_request(const Endpoint& endpoint, const std::string& token, nlohmann::json message,
                            std::chrono::milliseconds timeout) {
  CoordinatorConnection connection(endpoint, token);
  return connection.request(std::move(message), timeout);
}

std::unique_ptr<HeartbeatClient> HeartbeatClient::from_env(int64_t world_size) {
  const char* address = std::getenv("LINEA_COORDINATOR");
  if (!address || !*address) return nullptr;
  try {
    const Endpoint endpoint = Endpoint::parse(address, "LINEA_COORDINATOR");
    const char* token_file = std::getenv("LINEA_COORDINATOR_TOKEN_FILE");
    const char* run = std::getenv("LINEA_RUN_ID");
    const char* attempt_text = std::getenv("LINEA_ATTEMPT");
    if (!token_file || !*token_file)
      throw std::invalid_argument("LINEA_COORDINATOR_TOKEN_FILE: expected a file, unset");
    if (!run || !*run) throw std::invalid_argument("LINEA_RUN_ID: expected a run name, unset");
    int64_t attempt = 0;
    if (attempt_text) {
      const std::string_view text(attempt_text);
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), attempt);
      if (ec != std::errc() || end != text.data() + text.size() || attempt < 0)
        throw std::invalid_argument("LINEA_ATTEMPT: expected an integer >= 0, got \"" + std::string(text) + "\"");
    }
    return std::make_unique<HeartbeatClient>(endpoint, read_token_file(token_file), run, attempt, world_size);
  } catch (const std::exception& e) {
    LOG(ERROR) << "coordinator client: not reporting to the coordinator: " << e.what();
    return nullptr;
  }
}

HeartbeatClient::HeartbeatClient(Endpoint endpoint, std::string token, std::string run, int64_t attempt,
                                 int64_t world_size, std::chrono::milliseconds timeout)
    : run_(std::move(run)), attempt_(attempt), timeout_(timeout), connection_(std::move(endpoint), std::move(token)) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  registration_ = WorkerRegistration{run_, attempt_, ::getpid(), host, world_size}.to_json();
  thread_ = std::thread([this] { send_loop(); });
}

HeartbeatClient::~HeartbeatClient() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void HeartbeatClient::heartbeat(const Heartbeat& progress) noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_ = progress;
  }
  wake_.notify_all();
}

int64_t HeartbeatClient::sent() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sent_;
}

int64_t HeartbeatClient::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_;
}

void HeartbeatClient::send_loop() {
  using Clock = std::chrono::steady_clock;
  Clock::time_point next_failure_log = Clock::time_point::min();
  int64_t failures_since_log = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || registration_ || pending_; });
    nlohmann::json message;
    if (registration_) {
      message = std::move(*registration_);
      registration_.reset();
    } else if (pending_) {
      message = WorkerHeartbeat{run_, attempt_, *pending_}.to_json();
      pending_.reset();
    } else {
      return;  // stopping with nothing left to send
    }
    lock.unlock();
    std::string error;
    for (bool retry = connection_.connected();; retry = false) {  // a kept connection may have gone stale
      try {
        connection_.request(message, timeout_);
        error.clear();
      } catch (const std::exception& e) {
        error = e.what();
      }
      if (error.empty() || !retry) break;
    }
    lock.lock();
    if (error.empty()) {
      ++sent_;
      if (failures_since_log > 0) LOG(INFO) << "coordinator client: reaching the coordinator again";
      failures_since_log = 0;
      next_failure_log = Clock::time_point::min();
      continue;
    }
    ++failed_;
    ++failures_since_log;
    if (Clock::now() >= next_failure_log) {
      LOG(WARNING) << "coordinator client: " << error << " (" << failures_since_log
                   << " failures since the last report; training goes on)";
      next_failure_log = Clock::now() + std::chrono::minutes(1);
    }
  }
}

}  // namespace linea::coordinator
